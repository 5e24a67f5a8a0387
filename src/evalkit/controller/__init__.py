"""The controller side of a job: it launches the workers, ships their spool to MLflow and records the run.

Runs in the `evalkit` process (one per job, or one per sweep), talks to the tracking store, and never imports
a wrapper, the worker or the observers: workers are separate processes, reached only through the run
directory (`job.json` in, the spool out).
"""
