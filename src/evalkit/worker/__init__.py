"""The worker side: one process per rank builds the task, attaches the observers and hands the job to the
adapter. It talks to nobody but its spool; it never imports the controller, the tracking client or a verdict.
"""
