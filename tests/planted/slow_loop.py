"""The baseline loop made slower by a known amount, for the performance probe's tests and benchmark.

`SlowBaselineAdapter(options={"slower": F, "jitter": J, "startup_ms": S, "helper": H})`: after every optimizer step
a busy wait of F times the CPU time the step itself took (`time.process_time` from the end of the previous wait to
this step's end, read by a global optimizer post hook registered after evalkit's observers: the time the job spends
parked at the turn table is no CPU time, so it is not counted as work), plus, with J > 0, a random wait of J times
that step's work (normal, clipped at zero: a 2 % jitter for J = 0.02); so every step takes (1 + F) times its own work
on average: a per-step cost of F x the baseline's step time, planted. S > 0 adds a busy wait of S ms once, before
training (a start-up cost only). H > 0 starts a helper thread that wakes every `HELPER_PERIOD_S` of wall time and
works for H times that period of its own CPU time, as an asynchronous logger's flush or a prefetcher's poll does: on
the training's core it takes a share H / (1 + H) of the time (a step about H slower), but off the main thread and on
the clock, not on the steps (the performance probe charges it to the wrapper only when the wrapper's whole process
waits while parked). F = J = S = H = 0 is an identical copy of the baseline. The effective config reports the median
wait (`planted_added_ms`), to compare the probe's figure with.
"""
from __future__ import annotations

import random
import statistics
import threading
import time
from typing import Any

from torch.optim.optimizer import register_optimizer_step_post_hook

from evalkit.adapters.baseline import BaselineAdapter
from evalkit.contract import EffectiveConfig

HELPER_PERIOD_S = 0.01


def busy(seconds: float) -> None:
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        pass


class SlowBaselineAdapter(BaselineAdapter):
    option_names = ("slower", "jitter", "startup_ms", "helper")

    def __init__(self, mode: str = "aligned", options: dict[str, Any] | None = None):
        super().__init__(mode, options)
        self.slower = float(self.options.get("slower", 0.0))
        self.jitter = float(self.options.get("jitter", 0.0))
        self.startup_ms = float(self.options.get("startup_ms", 0.0))
        self.helper = float(self.options.get("helper", 0.0))
        unknown = set(self.options) - {"slower", "jitter", "startup_ms", "helper"}
        if unknown or not 0 <= self.slower < 10 or not 0 <= self.jitter < 1 or self.startup_ms < 0 \
                or not 0 <= self.helper < 10:
            raise ValueError(f"trainer.options: slower={self.slower} must lie in [0, 10), jitter={self.jitter} in "
                             f"[0, 1), startup_ms={self.startup_ms} >= 0, helper={self.helper} in [0, 10); "
                             f"unknown: {sorted(unknown)}")
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

        done = threading.Event()
        helper = threading.Thread(target=_helper, args=(self.helper, done), name="planted-helper", daemon=True)

        hooks = [register_optimizer_step_post_hook(wait)] if self.slower or self.jitter else []
        if self.helper:
            helper.start()
        try:
            super().fit(job)
        finally:
            for hook in hooks:
                hook.remove()
            done.set()

    def effective_config(self) -> EffectiveConfig:
        out = super().effective_config()
        out.details.update(planted_slower=self.slower, planted_jitter=self.jitter, planted_startup_ms=self.startup_ms,
                           planted_helper=self.helper)
        out.details["planted_added_ms"] = 1000 * statistics.median(self.waits) if self.waits else 0.0
        return out


def _helper(share: float, done: threading.Event) -> None:
    """The helper thread: every HELPER_PERIOD_S, `share` of that period of its own CPU time (not wall time: on a
    core it shares with training it gets that much work done, however the two are scheduled), until `done`."""
    while not done.wait(HELPER_PERIOD_S):
        until = time.thread_time() + share * HELPER_PERIOD_S
        while time.thread_time() < until:
            pass
