"""The long run: memory and log growth through a few thousand short steps, and the step count, each judged against
the baseline's long run on the same settings in the same probe run (`long-run-baseline`).

A slope is the OLS slope of the sampled RSS (on CUDA the allocator's bytes) against the step, in KiB per 1,000
steps, with its 95 % interval; the first tenth of the run is left out (the allocator's warm-up). The hand-written
loop's own RSS grows too (allocator arenas, the observers' per-step lists: 176 to 433 KiB per 1,000 steps on this
machine's CPU, depending on the run's length), so no absolute limit tells a leak from that; the wrapper's slope is
compared with the baseline's, measured beside it:
- leak (fail): the wrapper's lower bound exceeds `LEAK_RATIO` times the baseline's upper bound AND exceeds that
  upper bound by more than the floor `probe.leak_kb_per_1k_steps` (allocator noise; what decides when the
  baseline's own slope is near zero, as the CUDA allocator's is);
- no leak (pass): the wrapper's upper bound is within the baseline's slope + the floor (the baseline's estimate,
  not its upper bound: a pass needs the wrapper's interval to fit). Not within `LEAK_RATIO` x the baseline's slope:
  where the baseline grows 0.43 KiB a step, twice it let a leak of 0.55 KiB a step (twice the floor) pass in 11.5 %
  of 200 synthetic pairs at 300 steps, and in 3 % at 3,000 steps once the two processes' allocators differ by
  +-15 % (35 % at +-50 %); the floor alone passes it in none (0.5 % and 4 % at +-50 %), at the cost of an identical
  wrapper's 300-step pass rate (90 % -> 72 %, the rest inconclusive, never a fail);
- otherwise inconclusive (not exercised): the intervals are too wide to tell; a longer run (`probe.long_steps`)
  narrows them.
Logs (the bytes of the wrapper's log files and console output) by the same rule, the floor
`probe.log_kb_per_1k_steps`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from evalkit.probes.evidence import JobEvidence

WARMUP_FRACTION = 0.1
# LEAK_RATIO = 2 (the fail rule only), calibrated on 200 synthetic pairs of RSS series (the baseline's measured slopes,
# 0.18 and 0.43 KiB a step, plus 64 KiB Gaussian noise and 16 KiB page jumps a sample, 100 samples, the two processes'
# allocators up to +-15 % apart; test_judge.py::test_the_leak_rule_*): 3,000 steps: the baseline's slope passes
# >= 95 %, 4x it fails >= 90 %; 300 steps: the baseline's slope never fails (about 72 % pass, the rest inconclusive),
# 4x 0.43 fails >= 90 %, 4x never passes; a leak of twice the floor never passes.
LEAK_RATIO = 2.0
PASS, FAIL, UNDECIDED = "pass", "fail", "not exercised"


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
    if np.ptp(y) == 0:                      # a constant series: slope 0, no spread (linregress gives nan)
        return Slope(0.0, 0.0, 0.0, len(x))
    fit = stats.linregress(x, y)
    half = stats.t.ppf(0.975, len(x) - 2) * fit.stderr
    half = half if math.isfinite(half) else 0.0
    return Slope(fit.slope * 1000, (fit.slope - half) * 1000, (fit.slope + half) * 1000, len(x))


def against_baseline(wrapper: Slope, baseline: Slope, floor: float) -> str:
    """PASS, FAIL or UNDECIDED: the wrapper's slope against the baseline's (module docstring's rule)."""
    high, estimate = max(baseline.high, 0.0), max(baseline.per_1k, 0.0)
    if wrapper.low > LEAK_RATIO * high and wrapper.low - high > floor:
        return FAIL
    if wrapper.high <= estimate + floor:
        return PASS
    return UNDECIDED


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
    baseline_memory: Slope | None = None
    baseline_logs: Slope | None = None
    undecided: list[str] = field(default_factory=list)    # what could not be judged, and how to judge it

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def status(self) -> str:
        return FAIL if self.problems else UNDECIDED if self.undecided else PASS


def judge_long_run(job: JobEvidence, baseline: JobEvidence | None, leak_floor: float,
                   log_floor: float) -> LongRun:
    """The wrapper's long run against `baseline`, the baseline's long run of the same probe run."""
    asked = int(job.config.get("train", {}).get("max_steps", 0))
    numbers = [int(s["step"]) for s in job.steps]
    problems: list[str] = []
    undecided: list[str] = []
    if job.status != "FINISHED":
        problems.append(f"the long run ended {job.status}: {job.failure_reason}")
    if numbers != list(range(1, len(numbers) + 1)) or len(numbers) != asked:
        problems.append(f"{len(numbers)} steps recorded (numbered {numbers[0] if numbers else '-'}.."
                        f"{numbers[-1] if numbers else '-'}) for {asked} optimizer steps asked")
    column = "cuda_allocated" if any(r.get("cuda_allocated") is not None for r in job.memory) else "rss"
    memory, logs = slope(*series(job, column)), slope(*series(job, "log_bytes"))
    base_memory = base_logs = None
    if baseline is None or baseline.status != "FINISHED":
        why = "not run" if baseline is None else f"{baseline.status}: {baseline.failure_reason}"
        undecided.append(f"the baseline's long run ({why}) gives the slopes nothing to be compared with")
    else:
        base_memory, base_logs = slope(*series(baseline, column)), slope(*series(baseline, "log_bytes"))
        if base_memory is None:
            undecided.append(f"the baseline's long run has too few {column} samples to fit a slope")
    if memory is None:
        problems.append("too few memory samples to fit a slope (observe.memory_every)")
    elif base_memory is not None:
        _judge_growth(f"{column} grows", memory, base_memory, leak_floor, problems, undecided, "memory leak: ")
    if logs is not None and baseline is not None and baseline.status == "FINISHED":
        base = base_logs if base_logs is not None else Slope(0.0, 0.0, 0.0, 0)    # the baseline logs nothing
        _judge_growth("log files grow", logs, base, log_floor, problems, undecided)
    return LongRun(len(numbers), asked, problems, memory, logs, base_memory, base_logs, undecided)


def _judge_growth(what: str, wrapper: Slope, base: Slope, floor: float, problems: list[str], undecided: list[str],
                  label: str = "") -> None:
    """One growth (memory or logs) against the baseline's: a problem when it fails, a note when undecided."""
    verdict = against_baseline(wrapper, base, floor)
    if verdict == FAIL:
        problems.append(f"{label}{what} {wrapper.text()}, more than {LEAK_RATIO:g}x the baseline's {base.text()} and "
                        f"more than {floor:g} KiB per 1,000 steps over it")
    elif verdict == UNDECIDED:
        undecided.append(f"{what} {wrapper.text()} against the baseline's {base.text()}: the intervals are too wide "
                         "to tell a leak (raise probe.long_steps)")
