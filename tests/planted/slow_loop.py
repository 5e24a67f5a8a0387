"""The baseline loop made slower by a known amount, for the performance probe's tests and benchmark.

`SlowBaselineAdapter(options={"slower": F, "jitter": J, "startup_ms": S})`: after every optimizer step a busy wait of
F times the CPU time the step itself took (`time.process_time` from the end of the previous wait to this step's end,
read by a global optimizer post hook registered after evalkit's observers: the time the job spends parked at the
turn table is no CPU time, so it is not counted as work), plus, with J > 0, a random wait of J times that step's work
(normal, clipped at zero: a 2 % jitter for J = 0.02); so every step takes (1 + F) times its own work on average: a
per-step cost of F x the baseline's step time, planted. S > 0 adds a busy wait of S ms once, before training (a
start-up cost only). F = J = S = 0 is an identical copy of the baseline. The effective config reports the median
wait (`planted_added_ms`), to compare the probe's figure with.
"""
from __future__ import annotations

import random
import statistics
import time
from typing import Any

from torch.optim.optimizer import register_optimizer_step_post_hook

from adapters.baseline import BaselineAdapter
from evalkit.contract import EffectiveConfig


def busy(seconds: float) -> None:
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        pass


class SlowBaselineAdapter(BaselineAdapter):
    def __init__(self, mode: str = "aligned", options: dict[str, Any] | None = None):
        super().__init__(mode, options)
        self.slower = float(self.options.get("slower", 0.0))
        self.jitter = float(self.options.get("jitter", 0.0))
        self.startup_ms = float(self.options.get("startup_ms", 0.0))
        if not 0 <= self.slower < 10 or not 0 <= self.jitter < 1 or self.startup_ms < 0:
            raise ValueError(f"trainer.options: slower={self.slower} must lie in [0, 10), jitter={self.jitter} in "
                             f"[0, 1), startup_ms={self.startup_ms} >= 0")
        self.waits: list[float] = []

    def fit(self, job) -> None:
        busy(self.startup_ms / 1000)
        last = [time.process_time()]
        rng = random.Random(job.seed)

        def wait(*_) -> None:
            work = time.process_time() - last[0]
            added = max(0.0, self.slower * work + self.jitter * work * rng.gauss(0.0, 1.0))
            busy(added)
            self.waits.append(added)
            last[0] = time.process_time()

        hook = register_optimizer_step_post_hook(wait) if self.slower or self.jitter else None
        try:
            super().fit(job)
        finally:
            if hook is not None:
                hook.remove()

    def effective_config(self) -> EffectiveConfig:
        out = super().effective_config()
        out.details.update(planted_slower=self.slower, planted_jitter=self.jitter, planted_startup_ms=self.startup_ms)
        out.details["planted_added_ms"] = 1000 * statistics.median(self.waits) if self.waits else 0.0
        return out
