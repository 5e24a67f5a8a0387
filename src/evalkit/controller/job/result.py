"""How one job ended, as its caller (a sweep, a probe, `evalkit-ship`) sees it: the controller of the job
(run.py) and of a node's ranks (nodes.py) both answer with it."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class JobResult:
    run_id: str | None
    ok: bool
    reason: str = ""
    status: str = ""             # the run's end: FINISHED, FAILED or KILLED
    reused: bool = False         # a resumed sweep kept this earlier FINISHED run instead of running the job
    unshipped: str | None = None  # the job's directory, when its records wait in its spool for the store
