"""Which checkpoint entries a wrapper wrote, and after which optimizer step (a listing, whatever the layout).

The job's checkpoint directory is listed at each optimizer step's end: an entry (file or directory) seen there for
the first time was written after the previous step ended, so it belongs to that step (the wrapper saves step k's
checkpoint after step k's optimizer step, before step k+1's). `finish` lists once more (the last step's
checkpoint) and measures every entry's size on disk. Only the `full` profile watches (a listing per step).
"""
from __future__ import annotations

import os


def entry_bytes(path: str) -> int:
    """Bytes on disk of a file, or of every file under a directory."""
    if os.path.isfile(path):
        return os.path.getsize(path)
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:      # removed while listing (a wrapper rotating its checkpoints)
                pass
    return total


class CheckpointWatch:
    def __init__(self, ckpt_dir: str | None):
        self.ckpt_dir = ckpt_dir
        self.seen: dict[str, int] = {}      # entry name -> the step it was written after
        self._listed_at = -1
        self.poll(0)                         # entries there before training (a resumed job's directory is fresh)

    def _names(self) -> list[str]:
        try:
            return sorted(n for n in os.listdir(self.ckpt_dir) if ".tmp" not in n)
        except (OSError, TypeError):
            return []

    def poll(self, completed_step: int) -> None:
        """At the end of step `completed_step + 1` (or at `finish`): new entries belong to `completed_step`."""
        for name in self._names():
            self.seen.setdefault(name, completed_step)

    def listing(self, last_step: int) -> list[dict]:
        """Every entry with its step and size, in the order written (after the final listing)."""
        self.poll(last_step)
        rows = [{"name": n, "after_step": s, "bytes": entry_bytes(os.path.join(self.ckpt_dir, n))}
                for n, s in self.seen.items() if os.path.exists(os.path.join(self.ckpt_dir, n))]
        return sorted(rows, key=lambda r: (r["after_step"], r["name"]))
