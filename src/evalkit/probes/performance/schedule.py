"""How the performance probe's jobs take turns, and when they stop (the `Schedule` of controller/turns/rounds.py).

A round runs one block of each job: per depth the baseline's block and the wrapper's, one right after the other
(baseline first in even rounds, wrapper first in odd ones, so that neither arm always follows the other); the sizes
in order. A block is `probe.performance.block_ms` of the baseline's steps at that depth (from its median warm-up
step), the same number of steps for both arms.

Why blocks of 20 ms: measured on this 2-core machine (scripts/bench_performance_probe.py --calibrate, the figures in
docs/probes/performance.md), the spread of a round's log ratio between identical copies falls steeply up to blocks of
~20 ms (the cost of switching processes and of the caches each block starts cold, a fixed cost per block, shrinks
against the block) and little beyond, while longer blocks mean fewer rounds in the same minute.

The rounds stop at the first look (blocks.looks) whose interval decides against the budget, at
`probe.performance.time_limit_s` or at `probe.performance.max_rounds`.
"""
from __future__ import annotations

import time

import numpy as np
from omegaconf import DictConfig

from evalkit.probes.performance.blocks import (
    REFERENCE_STEP_MS,
    Estimate,
    Size,
    decide,
    decision_level,
    estimate,
    looks,
)
from evalkit.probes.performance.plan import BASELINE, PROFILE_STEPS, WRAPPER, job_name, sizes

MIN_BLOCK_STEPS = 4     # a block of one step is mostly the cold start after another process ran (see above)


class PerformanceSchedule:
    def __init__(self, cfg: DictConfig):
        settings = cfg.probe.performance
        self.sizes = sizes(cfg)
        self.block_s = settings.block_ms / 1000
        self.time_limit_s, self.max_rounds, self.budget = settings.time_limit_s, settings.max_rounds, settings.budget
        self.reference_ms = float(settings.get("reference_step_ms", REFERENCE_STEP_MS))
        self.level = decision_level(self.max_rounds)
        self.looks = set(looks(self.max_rounds))
        self.seconds: dict[str, list[float]] = {job_name(w, a): [] for w in self.sizes for a in (BASELINE, WRAPPER)}
        self.steps: dict[int, int] = {}
        self.started: float | None = None
        self.last: Estimate | None = None

    def block_steps(self, warmup_step_s: dict[str, float]) -> dict[str, int]:
        for depth in self.sizes:
            step = warmup_step_s.get(job_name(depth, BASELINE)) or self.block_s
            self.steps[depth] = max(MIN_BLOCK_STEPS, round(self.block_s / step))
        self.started = time.monotonic()
        return {job_name(w, a): self.steps[w] for w in self.sizes for a in (BASELINE, WRAPPER)}

    def order(self, round_index: int) -> list[str]:
        arms = (BASELINE, WRAPPER) if round_index % 2 == 0 else (WRAPPER, BASELINE)
        return [job_name(w, a) for w in self.sizes for a in arms]

    def current(self) -> Estimate:
        return estimate([Size(w, self.steps[w], np.array(self.seconds[job_name(w, BASELINE)]),
                               np.array(self.seconds[job_name(w, WRAPPER)])) for w in self.sizes], self.level,
                        self.reference_ms)

    def add(self, round_index: int, seconds: dict[str, float]) -> str | None:
        for name, value in seconds.items():
            self.seconds[name].append(value)
        rounds = round_index + 1
        out_of_time = time.monotonic() - (self.started or time.monotonic()) > self.time_limit_s
        if rounds not in self.looks and not out_of_time:
            return None
        self.last = self.current()
        call = decide(self.last.fraction, self.budget)
        if call != "undecided":
            return f"{call} the budget at {rounds} rounds ({self.progress()})"
        if out_of_time:
            return f"time limit of {self.time_limit_s:g} s, undecided ({self.progress()})"
        if rounds >= self.max_rounds:
            return f"{rounds} rounds (probe.performance.max_rounds), undecided ({self.progress()})"
        return None

    def progress(self) -> str:
        if self.last is None:
            return f"{len(next(iter(self.seconds.values())))} rounds, first look at {min(self.looks)}"
        f, step_ms = self.last.fraction, self.last.reference_ms
        return (f"{100 * f.estimate:+.2f}% [{100 * f.low:+.2f}, {100 * f.high:+.2f}] of a {step_ms:g} ms "
                f"step after {self.last.rounds} rounds (budget {100 * self.budget:g}%)")


class ProfileSchedule:
    """The two profile jobs: started together (each start-up on a core of its own), then one block each, one after
    the other, of the profiled steps and the step before and after them (observe/call_profile.py: its window starts
    one step after the warm-up), so that no profiled step runs beside the other job or includes a wait."""

    def __init__(self, names: list[str]):
        self.names = names

    def block_steps(self, warmup_step_s: dict[str, float]) -> dict[str, int]:
        return {name: PROFILE_STEPS + 2 for name in self.names}

    def order(self, round_index: int) -> list[str]:
        return list(self.names)

    def add(self, round_index: int, seconds: dict[str, float]) -> str | None:
        return "both arms profiled"

    def progress(self) -> str:
        return "profiling"
