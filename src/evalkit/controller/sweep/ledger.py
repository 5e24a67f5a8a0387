"""A sweep's ledger: what every process of the sweep says about its jobs (a job's end; a job's records shipped
later), one small JSON file per entry in the ledger's folder, merged when read.

Each entry is written to a temporary file in the folder and renamed into place (rename is atomic, also on NFS):
a reader sees a whole entry or none. Nothing is appended to a shared file. O_APPEND is not atomic on NFS (`open(2)`),
so appends from several hosts (a sweep's jobs on several SLURM nodes) can interleave or be lost. An entry's name
holds its host, process, time and a counter, so two writers never pick the same name.
A ledger written before this (`.evalkit_jobs_<sweep id>.jsonl`, one line per entry) is still read and added to.
"""
from __future__ import annotations

import itertools
import json
import os
import socket
import time

FOLDER = ".evalkit_jobs_{sweep_id}"      # in the sweep directory
HOST_ENV = "EVALKIT_LEDGER_HOST"         # the host name an entry is filed under (tests: a second host's writer)
_counter = itertools.count()


def path_for(sweep_dir: str, sweep_id: str) -> str:
    return os.path.join(sweep_dir, FOLDER.format(sweep_id=sweep_id))


def add(ledger: str, entry: dict) -> None:
    """File one entry, whole or not at all, whichever process or host writes it."""
    if os.path.isfile(ledger):          # an earlier evalkit's ledger: one line, one write, as it was written
        fd = os.open(ledger, os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, (json.dumps(entry) + "\n").encode())
        finally:
            os.close(fd)
        return
    os.makedirs(ledger, exist_ok=True)
    host = (os.environ.get(HOST_ENV) or socket.gethostname()).replace(os.sep, "_")
    name = f"{time.time_ns():020d}-{host}-{os.getpid()}-{next(_counter)}.json"
    tmp = os.path.join(ledger, f".{name}.tmp")
    with open(tmp, "w") as fh:
        json.dump(entry, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, os.path.join(ledger, name))


def entries(ledger: str) -> list[dict]:
    """Every entry filed so far, in the order their names sort (their time of filing); [] before the first."""
    if os.path.isfile(ledger):
        with open(ledger) as fh:
            return [json.loads(line) for line in fh if line.strip()]
    try:
        names = sorted(n for n in os.listdir(ledger) if n.endswith(".json") and not n.startswith("."))
    except FileNotFoundError:
        return []
    out = []
    for name in names:
        with open(os.path.join(ledger, name)) as fh:
            out.append(json.load(fh))
    return out


def last_change(ledger: str) -> float | None:
    """When the ledger last changed (its newest entry's file, or the legacy file), None when it holds nothing."""
    if os.path.isfile(ledger):
        return os.path.getmtime(ledger)
    try:
        times = [e.stat().st_mtime for e in os.scandir(ledger) if e.name.endswith(".json")]
    except FileNotFoundError:
        return None
    return max(times, default=None)
