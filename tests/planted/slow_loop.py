"""The baseline loop made slower by a known amount, for the performance probe's tests.

`SlowBaselineAdapter(options={"slower": F})`: after every optimizer step a busy wait of F times the time the
step itself took (from the end of the previous wait to this step's end, read by a global optimizer post hook
registered after evalkit's observers), so every step takes (1 + F) times its own work: a per-step cost of F x
the baseline's step time, planted. F = 0 is an identical copy of the baseline. The effective config reports the
median wait (`planted_added_ms`), to compare the probe's figure with.
"""
from __future__ import annotations

import statistics
import time
from typing import Any

from torch.optim.optimizer import register_optimizer_step_post_hook

from adapters.baseline import BaselineAdapter


class SlowBaselineAdapter(BaselineAdapter):
    def __init__(self, mode: str = "aligned", options: dict[str, Any] | None = None):
        super().__init__(mode, options)
        self.slower = float(self.options.get("slower", 0.0))
        if not 0 <= self.slower < 10:
            raise ValueError(f"trainer.options.slower={self.slower} must lie in [0, 10)")
        self.waits: list[float] = []

    def fit(self, job) -> None:
        last = [time.perf_counter()]

        def wait(*_) -> None:
            now = time.perf_counter()
            added = self.slower * (now - last[0])
            until = now + added
            while time.perf_counter() < until:
                pass
            self.waits.append(added)
            last[0] = time.perf_counter()

        hook = register_optimizer_step_post_hook(wait) if self.slower else None
        try:
            super().fit(job)
        finally:
            if hook is not None:
                hook.remove()

    def effective_config(self) -> dict[str, Any]:
        out = dict(super().effective_config())
        out["planted_slower"] = self.slower
        out["planted_added_ms"] = 1000 * statistics.median(self.waits) if self.waits else 0.0
        return out
