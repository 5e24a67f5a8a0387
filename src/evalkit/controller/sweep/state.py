"""A sweep's own file in its directory, `.evalkit_sweep_<parent run id>.json`: what `evalkit-ship <sweep dir>`
needs to end the sweep's parent run when the sweep could not (the store was down at its end, or its process was
killed).

The sweep's process holds an exclusive lock on the file while it runs, so `evalkit-ship` never ends a live sweep.
The file is rewritten through the locked descriptor (a rename would make a new, unlocked file).
"""
from __future__ import annotations

import fcntl
import glob
import json
import os
import time

STATE_FILE = ".evalkit_sweep_{parent_run_id}.json"   # the parent run's id: unique, where sweep ids may repeat


class SweepState:
    """The file of one running sweep, locked until `release()` (or the process's end)."""

    def __init__(self, path: str, fd: int, fields: dict):
        self.path, self._fd, self.fields = path, fd, fields

    @classmethod
    def create(cls, sweep_dir: str, sweep_id: str, parent_run_id: str, **fields) -> "SweepState":
        path = os.path.join(sweep_dir, STATE_FILE.format(parent_run_id=parent_run_id))
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)    # a new run's id: nobody else holds it
        state = cls(path, fd, {"sweep_id": sweep_id, "parent_run_id": parent_run_id, "pid": os.getpid(),
                               "started_wall": time.time(), **fields})
        state.update()
        return state

    def update(self, **fields) -> None:
        self.fields.update(fields)
        if self._fd is None:
            return
        data = json.dumps(self.fields).encode()
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, data, 0)

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)      # closing the descriptor drops the lock
            self._fd = None

    def __getstate__(self) -> dict:   # a launcher's job process (joblib, submitit) gets a copy without the lock
        return {"path": self.path, "_fd": None, "fields": self.fields}


def sweep_states(sweep_dir: str) -> list[str]:
    """The state files of the sweeps that ran in `sweep_dir`, oldest first."""
    return sorted(glob.glob(os.path.join(sweep_dir, STATE_FILE.format(parent_run_id="*"))), key=os.path.getmtime)


def claim_idle(path: str) -> SweepState | None:
    """The file of a sweep whose process is gone, locked for this one; None while that sweep still runs."""
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    with open(path) as fh:
        return SweepState(path, fd, json.load(fh))
