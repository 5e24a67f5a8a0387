"""The local spool: each worker rank appends JSON lines to its own file; the controller tails them.

One `os.write` per optimizer step on an O_APPEND descriptor: a record is in the kernel's page cache
as soon as the step ends, so a worker killed with SIGKILL keeps every step it finished. No tracking
client is ever called from a worker.
"""
from __future__ import annotations

import json
import os
from typing import Any, Iterator


def records_path(spool_dir: str, rank: int) -> str:
    return os.path.join(spool_dir, f"records_rank{rank}.jsonl")


class SpoolWriter:
    def __init__(self, spool_dir: str, rank: int):
        os.makedirs(spool_dir, exist_ok=True)
        self.dir, self.rank = spool_dir, rank
        self._fd = os.open(records_path(spool_dir, rank), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._pending: list[str] = []

    def add(self, record: dict[str, Any]) -> None:
        """Queue a record; it reaches the file at the next `flush` (the end of the optimizer step)."""
        self._pending.append(json.dumps(record, separators=(",", ":")))

    def flush(self) -> None:
        if self._pending:
            os.write(self._fd, ("\n".join(self._pending) + "\n").encode())
            self._pending.clear()

    def write_json(self, name: str, payload: Any) -> None:
        """A whole-file JSON document beside the records (summary, versions, effective config)."""
        tmp = os.path.join(self.dir, f".{name}.tmp{self.rank}")
        with open(tmp, "w") as fh:
            json.dump(payload, fh, indent=1, default=str)
        os.replace(tmp, os.path.join(self.dir, name))

    def close(self) -> None:
        self.flush()
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
