"""The local spool: each worker rank appends JSON lines to its own file; the controller tails them.

One `os.write` per optimizer step on an O_APPEND descriptor: a record is in the kernel's page cache
as soon as the step ends, so a worker killed with SIGKILL keeps every step it finished. No tracking
client is ever called from a worker.
"""
from __future__ import annotations

import errno
import json
import os
from typing import Any, Iterator


def records_path(spool_dir: str, rank: int) -> str:
    return os.path.join(spool_dir, f"records_rank{rank}.jsonl")


class SpoolFull(OSError):
    """A records write the device refused (ENOSPC, EDQUOT, a short write): the records before it are whole."""


class SpoolWriter:
    def __init__(self, spool_dir: str, rank: int):
        os.makedirs(spool_dir, exist_ok=True)
        self.dir, self.rank = spool_dir, rank
        self._fd = os.open(records_path(spool_dir, rank), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._whole = os.fstat(self._fd).st_size     # the file's length up to its last whole record
        self._pending: list[str] = []
        self._full = False                           # faults.disk_full_at_step: the device is full from now on
        self._refused = False                        # a write was refused (reported then)

    def add(self, record: dict[str, Any]) -> None:
        """Queue a record; it reaches the file at the next `flush` (the end of the optimizer step)."""
        self._pending.append(json.dumps(record, separators=(",", ":")))

    def flush(self) -> None:
        """Append the queued records in one write. A write the device refuses or cuts short is undone (the file
        is truncated back to its last whole record, so no half record is ever read) and raises SpoolFull naming
        the spool's folder."""
        if not self._pending:
            return
        data = ("\n".join(self._pending) + "\n").encode()
        try:
            written = self._write(data)
            if written != len(data):
                raise OSError(errno.ENOSPC, f"short write ({written} of {len(data)} bytes)")
        except OSError as exc:
            self._refused = True
            try:
                os.ftruncate(self._fd, self._whole)
            except OSError:
                pass
            raise SpoolFull(exc.errno, f"{exc.strerror or exc}: cannot write records to the spool {self.dir} (the "
                                       "device holding it is full?): free space there and run the job again; the "
                                       "records written before are kept and shipped") from exc
        self._whole += written
        self._pending.clear()

    def _write(self, data: bytes) -> int:
        if self._full:              # an injected full device: half of the write lands, then ENOSPC
            os.write(self._fd, data[:len(data) // 2])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return os.write(self._fd, data)

    def fill_device(self) -> None:
        """From now on every write fails as on a full device, after writing part of its bytes (a fault the
        worker injects: `faults.disk_full_at_step`)."""
        self._full = True

    def write_json(self, name: str, payload: Any) -> None:
        """A whole-file JSON document beside the records (summary, versions, effective config)."""
        tmp = os.path.join(self.dir, f".{name}.tmp{self.rank}")
        with open(tmp, "w") as fh:
            json.dump(payload, fh, indent=1, default=str)
        os.replace(tmp, os.path.join(self.dir, name))

    def close(self) -> None:
        try:
            if not self._refused:       # a refused write was reported where it happened: not again
                self.flush()
        finally:
            os.close(self._fd)


class SpoolTail:
    """Reads the complete lines appended to one rank's records file since the last call."""

    def __init__(self, spool_dir: str, rank: int):
        self.path = records_path(spool_dir, rank)
        self._offset = 0

    def read_new(self) -> Iterator[dict[str, Any]]:
        if not os.path.exists(self.path):
            return
        with open(self.path, "rb") as fh:
            fh.seek(self._offset)
            data = fh.read()
        end = data.rfind(b"\n") + 1          # a half-written last line waits for the next call
        self._offset += end
        for line in data[:end].splitlines():
            if line.strip():
                yield json.loads(line)


def read_json(spool_dir: str, name: str, default: Any = None) -> Any:
    path = os.path.join(spool_dir, name)
    if not os.path.exists(path):
        return default
    with open(path) as fh:
        return json.load(fh)
