"""One job owns its run directory: a lock while it runs, and a previous job's files moved aside first.

Two controllers sharing a directory would ship one spool twice and overwrite each other's `job.json`; a
directory reused later would ship the old spool under the new run. So a job takes an exclusive lock on
`<run dir>/.evalkit.lock` for its whole life (a second job there is refused), and moves what an earlier
job left (spool, records, checkpoints, logs) to `<run dir>/previous/<n>-<run id>/` before it writes
anything: nothing recorded is deleted, nothing old is shipped again. A job over several nodes: node 0 owns the shared
directory this way; the other nodes never lock nor move anything there (`controller/job/nodes.py`).
"""
from __future__ import annotations

import fcntl
import glob
import json
import os
import shutil
import uuid

from evalkit import names

LOCK_FILE = ".evalkit.lock"
# What a job writes into its run directory (Hydra's own .hydra/ and log stay where Hydra put them).
# `nodes`: a job over several nodes (controller/job/nodes.py): the nodes' reports and stop request (shared directory).
JOB_ENTRIES = (names.JOB_FILE, names.RUN_FILE, names.EXIT_CODES_FILE, names.SPOOL_DIR, names.RECORDS_DIR,
               names.CHECKPOINTS_DIR, names.LIGHTNING_DIR, names.NODES_DIR)
_UID = uuid.uuid4().hex[:6]


def process_uid() -> str:
    """Six hex characters fixed for this process: Hydra's `${evalkit_uid:}`, so two jobs started in the
    same second get different default run directories (Hydra's `${now:}` has one-second resolution)."""
    return _UID


def new_process_uid() -> str:
    """A fresh `process_uid()`: a process that runs several sweeps one after another (`evalkit.cli.run_sweep`)
    takes a new one per sweep, so no two of its sweeps can share a sweep directory."""
    global _UID
    _UID = uuid.uuid4().hex[:6]
    return _UID


class RunDirBusy(RuntimeError):
    """Another live evalkit job holds the run directory (the message names it and the fix)."""


class RunDirClaim:
    """The lock on one run directory, held until `release()` (or the process's end)."""

    def __init__(self, run_dir: str, fd: int, archived: str | None):
        self.run_dir, self._fd, self.archived = run_dir, fd, archived

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)      # closing the descriptor drops the flock
            self._fd = None


def claim(run_dir: str, what: str = "job") -> RunDirClaim:
    """Lock `run_dir` for this process; move a previous job's files aside. Raises RunDirBusy."""
    os.makedirs(run_dir, exist_ok=True)
    fd = os.open(os.path.join(run_dir, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        if what == "evalkit-ship":
            raise RunDirBusy(f"run directory {run_dir} belongs to an evalkit job that is still running (pid "
                             f"{holder}): it records itself; run evalkit-ship there after it has stopped (killed, or "
                             "told to by its own message)") from None
        raise RunDirBusy(f"run directory {run_dir} is in use by another evalkit job (pid {holder}): give this "
                         f"{what} a directory of its own (hydra.run.dir=..., or leave it unset)") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    return RunDirClaim(run_dir, fd, None)


def claim_fresh(run_dir: str) -> RunDirClaim:
    """`claim`, then move what an earlier job left in the directory to `previous/`."""
    lock = claim(run_dir)
    lock.archived = archive_previous(run_dir)
    return lock


def previous_entries(run_dir: str) -> list[str]:
    entries = [n for n in JOB_ENTRIES if os.path.lexists(os.path.join(run_dir, n))]
    entries += sorted(os.path.basename(p) for p in glob.glob(os.path.join(run_dir, names.WORKER_LOG_GLOB)))
    return entries


def archive_previous(run_dir: str) -> str | None:
    """Move an earlier job's files to `previous/<n>-<its run id>/`; returns that directory, or None."""
    entries = previous_entries(run_dir)
    if not entries:
        return None
    run_id = "unrecorded"
    try:
        with open(os.path.join(run_dir, names.RUN_FILE)) as fh:
            run_id = json.load(fh).get("run_id") or run_id
    except (OSError, ValueError):
        pass
    root = os.path.join(run_dir, names.PREVIOUS_DIR)
    os.makedirs(root, exist_ok=True)
    target = os.path.join(root, f"{len(os.listdir(root)) + 1:03d}-{run_id}")
    os.makedirs(target)
    for name in entries:
        shutil.move(os.path.join(run_dir, name), os.path.join(target, name))
    return target


def relocate(path: str | None, run_dir: str, archived: str | None) -> str | None:
    """`path` moved with the archive when it pointed inside a moved entry of `run_dir` (a resume from the
    directory's own earlier checkpoints), else unchanged."""
    if not path or not archived:
        return path
    full, base = os.path.abspath(path), os.path.abspath(run_dir)
    rel = os.path.relpath(full, base)
    if rel.startswith(os.pardir) or rel.split(os.sep)[0] not in os.listdir(archived):
        return path
    return os.path.join(archived, rel)
