"""Where a job's time and memory go, function by function (`observe.call_profile=N`; the performance probe's
untimed profile jobs).

`cProfile` over the N optimizer steps that follow the first step after the warm-up (each function's own time and
calls, per step; a job taking turns waits for its turn at the warm-up's end, outside that window), and
`tracemalloc` from before the wrapper's fit to the end of those steps (what is held then, by source file). Both slow
the job down (a call's profiling costs about a microsecond; tracing every allocation, more): the figures compare
two arms profiled alike, they are not step times. Written as `call_profile.json` beside the summary.
"""
from __future__ import annotations

import cProfile
import os
import pstats
import sys
import tracemalloc
from typing import Any

TOP_FUNCTIONS = 300        # kept per job, by own time
TOP_FILES = 100            # kept per job, by memory held


def where(filename: str) -> str:
    """A source file as a reader knows it: relative to the site-packages or sys.path entry it was imported from
    (`lightning/pytorch/loops/fit_loop.py`), `~builtin` for C functions."""
    if not filename or filename.startswith("~") or filename.startswith("<"):
        return "~builtin" if filename.startswith("~") else filename
    path = os.path.abspath(filename)
    best = ""
    for entry in sys.path:
        root = os.path.abspath(entry or ".")
        if path.startswith(root + os.sep) and len(root) > len(best):
            best = root
    return os.path.relpath(path, best) if best else path


class CallProfile:
    def __init__(self, steps: int, warmup_steps: int):
        self.steps, self.first = steps, warmup_steps + 1
        self._profile: cProfile.Profile | None = None
        self.result: dict[str, Any] | None = None
        tracemalloc.start(1)        # before the fit: what the wrapper allocates while it sets up counts too

    def after_step(self, step: int) -> None:
        """Called at the end of each optimizer step (`step`: steps completed)."""
        if step == self.first and self._profile is None:
            self._profile = cProfile.Profile()
            self._profile.enable()
        elif step == self.first + self.steps and self._profile is not None and self.result is None:
            self._profile.disable()
            self.result = {"steps": self.steps, "functions": self._functions(), "memory": self._memory()}

    def _functions(self) -> list[dict[str, Any]]:
        stats = pstats.Stats(self._profile).stats     # (file, line, name) -> (cc, nc, tottime, cumtime, callers)
        rows = [{"file": where(f), "line": line, "function": name, "calls": nc, "own_s": tt, "cumulative_s": ct}
                for (f, line, name), (cc, nc, tt, ct, _) in stats.items()]
        rows.sort(key=lambda r: -r["own_s"])
        return rows[:TOP_FUNCTIONS]

    def _memory(self) -> list[dict[str, Any]]:
        held = tracemalloc.take_snapshot().statistics("filename")
        tracemalloc.stop()
        return [{"file": where(s.traceback[0].filename), "bytes": s.size, "blocks": s.count} for s in held[:TOP_FILES]]

    def close(self) -> None:
        if self._profile is not None and self.result is None:
            self._profile.disable()
        if tracemalloc.is_tracing():
            tracemalloc.stop()
