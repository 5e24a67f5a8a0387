"""Named wall-clock marks of one job in its controller, written as `job_phases.json` into the job's run directory
(where a job's time goes; scripts/job_cost.py reads them beside the worker's start-up milestones and its
steps' wall times). `time.time()`, the clock the worker's marks use.

A job's first mark, `job_start`, begins a fresh set (a sweep runs its jobs one after another in one process). A
mark given the run directory writes every mark so far there; a write that fails is skipped: measuring never fails
a job."""
from __future__ import annotations

import contextlib
import json
import os
import time

FILE = "job_phases.json"
FIRST = "job_start"
_marks: dict[str, float] = {}


def mark(name: str, run_dir: str | None = None) -> None:
    """Record `name` now (the first time only; `job_start` begins a fresh set); with `run_dir`, write the marks."""
    if name == FIRST:
        _marks.clear()
    _marks.setdefault(name, time.time())
    if run_dir is not None:
        with contextlib.suppress(OSError), open(os.path.join(run_dir, FILE), "w") as fh:
            json.dump(_marks, fh)


def read(run_dir: str) -> dict[str, float]:
    """The marks a job wrote in `run_dir` ({} when it wrote none)."""
    try:
        with open(os.path.join(run_dir, FILE)) as fh:
            return {name: float(wall) for name, wall in json.load(fh).items()}
    except (OSError, ValueError):
        return {}
