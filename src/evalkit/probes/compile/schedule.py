"""How the compile probe's timed jobs take turns (the `Schedule` of controller/turns/rounds.py): each round one block of
every job, each loop's eager and compiled arms one right after the other (eager first in even rounds, compiled first in
odd ones), every block of a loop the same number of steps: `probe.block_ms` at its eager arm's median warm-up step
(the compiled arm's warm-up holds its compiling). The rounds stop at `probe.rounds` or `probe.time_limit_s`: the
figure is reported with its interval, not decided against a budget (judge.py)."""
from __future__ import annotations

import time

from omegaconf import DictConfig

from evalkit.probes.compile.plan import PAIRS, TIMED, job_name, timed_arms
from evalkit.probes.performance.schedule import MIN_BLOCK_STEPS


class CompileSchedule:
    def __init__(self, cfg: DictConfig):
        p = cfg.probe
        self.rounds, self.time_limit_s, self.block_s = int(p.rounds), float(p.time_limit_s), p.block_ms / 1000
        arms = set(timed_arms(cfg))
        self.pairs = [(job_name(TIMED, e), job_name(TIMED, c)) for e, c in PAIRS if e in arms and c in arms]
        self.done = 0
        self.started: float | None = None

    def block_steps(self, warmup_step_s: dict[str, float]) -> dict[str, int]:
        self.started = time.monotonic()
        steps = {}
        for eager, compiled in self.pairs:
            n = max(MIN_BLOCK_STEPS, round(self.block_s / (warmup_step_s.get(eager) or self.block_s)))
            steps[eager] = steps[compiled] = n
        return steps

    def order(self, round_index: int) -> list[str]:
        return [name for pair in self.pairs for name in (pair if round_index % 2 == 0 else pair[::-1])]

    def add(self, round_index: int, seconds: dict[str, float]) -> str | None:
        self.done = round_index + 1
        if self.done >= self.rounds:
            return f"{self.done} rounds (probe.rounds)"
        if time.monotonic() - (self.started or time.monotonic()) > self.time_limit_s:
            return f"time limit of {self.time_limit_s:g} s after {self.done} rounds"
        return None

    def progress(self) -> str:
        return f"{self.done} of {self.rounds} rounds"
