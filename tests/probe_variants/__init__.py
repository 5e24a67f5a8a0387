"""The e2e runs of a probe added by the recipe (docs/probes/adding.md), one module per probe: tests/probe_runs.py
reads them into PROBE_RUNS, so that its live runs, their recordings (scripts/record_probe_fixtures.py) and the
judging of those recordings need no edit outside the probe's own files."""
