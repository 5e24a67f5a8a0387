"""The long run: memory and log growth through a few thousand short steps, and the step count.

A leak is a slope of the sampled RSS (on CUDA also the allocator's bytes) whose 95 % confidence interval excludes
zero and exceeds the tolerance `probe.leak_kb_per_1k_steps` (1 MiB per 1,000 steps by default: the baseline's own
RSS rose 433 KiB per 1,000 steps over a 300-step run, allocator arenas and the observers' per-step lists; a leak of
1 KiB a step exceeds it). The first tenth of the run is left out: the allocator's
warm-up. Logs: the bytes of the wrapper's log files and console output, their slope against
`probe.log_kb_per_1k_steps`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from evalkit.probes.evidence import JobEvidence

WARMUP_FRACTION = 0.1


@dataclass
class Slope:
    per_1k: float            # units per 1000 steps
    low: float               # 95 % interval, per 1000 steps
    high: float
    samples: int

    def text(self, unit: str = "KiB") -> str:
        return f"{self.per_1k:+.1f} {unit} per 1,000 steps [95% {self.low:+.1f}, {self.high:+.1f}]"


def slope(steps: list[float], values: list[float], scale: float = 1024.0) -> Slope | None:
    """OLS slope of `values` against `steps` in units of `scale` bytes per 1000 steps, with its 95 % interval."""
    x, y = np.asarray(steps, float), np.asarray(values, float) / scale
    if len(x) < 5 or np.ptp(x) == 0:
        return None
    fit = stats.linregress(x, y)
    half = stats.t.ppf(0.975, len(x) - 2) * fit.stderr
    return Slope(fit.slope * 1000, (fit.slope - half) * 1000, (fit.slope + half) * 1000, len(x))


def series(job: JobEvidence, column: str) -> tuple[list[float], list[float]]:
    rows = [r for r in job.memory if r.get(column) is not None]
    if not rows:
        return [], []
    last = max(int(r["step"]) for r in rows)
    rows = [r for r in rows if int(r["step"]) > WARMUP_FRACTION * last]
    return [float(r["step"]) for r in rows], [float(r[column]) for r in rows]


@dataclass
class LongRun:
    steps_taken: int
    steps_asked: int
    problems: list[str]
    memory: Slope | None
    logs: Slope | None

    @property
    def ok(self) -> bool:
        return not self.problems


def judge_long_run(job: JobEvidence, leak_limit: float, log_limit: float) -> LongRun:
    asked = int(job.config.get("train", {}).get("max_steps", 0))
    numbers = [int(s["step"]) for s in job.steps]
    problems = []
    if job.status != "FINISHED":
        problems.append(f"the long run ended {job.status}: {job.failure_reason}")
    if numbers != list(range(1, len(numbers) + 1)) or len(numbers) != asked:
        problems.append(f"{len(numbers)} steps recorded (numbered {numbers[0] if numbers else '-'}.."
                        f"{numbers[-1] if numbers else '-'}) for {asked} optimizer steps asked")
    column = "cuda_allocated" if any(r.get("cuda_allocated") is not None for r in job.memory) else "rss"
    memory = slope(*series(job, column))
    logs = slope(*series(job, "log_bytes"))
    if memory is None:
        problems.append("too few memory samples to fit a slope (observe.memory_every)")
    elif memory.low > 0 and memory.per_1k > leak_limit:
        problems.append(f"memory leak: {column} grows {memory.text()}, over the tolerance of {leak_limit:g} KiB")
    if logs is not None and logs.low > 0 and logs.per_1k > log_limit:
        problems.append(f"log files grow {logs.text()}, over the tolerance of {log_limit:g} KiB")
    return LongRun(len(numbers), asked, problems, memory, logs)
