"""Start-up cost, per worker: seconds from the controller starting the process (`names.SPAWN_WALL_ENV`) to each
milestone: the worker's own modules and torch imported, the wrapper imported, the first training forward (the
model is wrapped by then) and the first optimizer step's end. Wall clock (`time.time`), so that the controller's
stamp and the worker's share one clock."""
from __future__ import annotations

import os
import time

from evalkit import names

MILESTONES = names.STARTUP_MILESTONES


class StartupMarks:
    def __init__(self) -> None:
        try:
            self.spawn: float | None = float(os.environ[names.SPAWN_WALL_ENV])
        except (KeyError, ValueError):
            self.spawn = None      # a worker started by hand: no start-up figures
        self.walls: dict[str, float] = {}

    def mark(self, milestone: str, wall: float | None = None) -> None:
        if wall is not None or milestone not in self.walls:
            self.walls[milestone] = time.time() if wall is None else wall

    def summary(self) -> dict[str, float]:
        """`startup_<milestone>_s` for every milestone reached, in seconds since the process was started."""
        if self.spawn is None:
            return {}
        return {f"startup_{m}_s": round(self.walls[m] - self.spawn, 4) for m in MILESTONES if m in self.walls}
