"""The performance probe's numbers: per job what its summary says, per width the paired comparison, over the
widths the fit `added = fixed + proportional x baseline step time`.

Every interval is a two-sided t interval over the repeats, paired by repeat (a baseline job and the wrapper job
run next to it): ratios on the log scale, differences in milliseconds. A width whose jobs are unstable (too few
repeats, the pairs' ratios spread by 10 % or more, the ratio drifting by 10 % or more from the first pairs to the
last) is reported as such and left out of the judgement and the fit. A drift of the machine itself (every job
slower, both arms alike) is reported, not held against the width: on a shared machine the level of all jobs moves
by tens of percent within minutes, while jobs run side by side stay within a few percent of each other.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

import numpy as np
from scipy import stats as st

from evalkit.analysis.robust import robust_sd
from evalkit.analysis.stats import interval, paired_test
from evalkit.names import STARTUP_MILESTONES as MILESTONES
from evalkit.probes.evidence import JobEvidence
from evalkit.probes.performance.plan import BASELINE, WRAPPER, parse_name

LEVEL = 0.95
MIN_REPEATS = 3
UNSTABLE_SPREAD = 0.10      # robust standard deviation (scaled MAD) of the pairs' log step-time ratios
UNSTABLE_DRIFT = 0.10       # change of the mean log ratio, first half of the pairs to the last half
REFERENCE_STEP_MS = 100.0   # "on a model whose step takes 100 ms"


@dataclass
class JobTiming:
    width: int
    repeat: int
    arm: str
    step_ms: float | None
    samples_per_s: float | None
    train_mem: float | None              # bytes: training memory (CPU: RSS above the import footprint)
    import_mem: float | None             # bytes: the import footprint (CPU)
    startup: dict[str, float] = field(default_factory=dict)   # milestone -> seconds since the process started

    @classmethod
    def of(cls, job: JobEvidence) -> "JobTiming":
        width, repeat, arm = parse_name(job.name)
        s = job.summary if job.status == "FINISHED" else {}
        step = s.get("step_time_median_s")
        return cls(width, repeat, arm, None if step is None else 1000.0 * float(step), s.get("samples_per_s"),
                   s.get("peak_mem_bytes"), s.get("import_rss_bytes"),
                   {m: float(s[f"startup_{m}_s"]) for m in MILESTONES if s.get(f"startup_{m}_s") is not None})


@dataclass
class Paired:
    """wrapper vs baseline on one quantity over the repeats: estimate and interval."""

    estimate: float
    low: float
    high: float
    n: int

    @property
    def text(self) -> str:
        return f"{self.estimate:.3g} [{self.low:.3g}, {self.high:.3g}]"


def paired_ratio(wrapper: list[float], baseline: list[float]) -> Paired:
    test = paired_test(np.log(wrapper), np.log(baseline))
    low, high = interval(test, LEVEL)
    return Paired(math.exp(float(test.estimate)), math.exp(float(low)), math.exp(float(high)), len(wrapper))


def paired_difference(wrapper: list[float], baseline: list[float]) -> Paired:
    test = paired_test(np.asarray(wrapper), np.asarray(baseline))
    low, high = interval(test, LEVEL)
    return Paired(float(test.estimate), float(low), float(high), len(wrapper))


@dataclass
class WidthResult:
    width: int
    pairs: list[tuple[JobTiming, JobTiming]]          # (baseline, wrapper) per repeat, both measured
    problems: list[str]                              # why its timing is not judged ("" when stable)
    baseline_ms: float = math.nan
    wrapper_ms: float = math.nan
    added_ms: Paired | None = None
    ratio: Paired | None = None
    mem_ratio: Paired | None = None
    mem_added: Paired | None = None

    @property
    def stable(self) -> bool:
        return not self.problems


def compare_width(width: int, jobs: list[JobTiming]) -> WidthResult:
    by_repeat: dict[int, dict[str, JobTiming]] = {}
    for j in jobs:
        by_repeat.setdefault(j.repeat, {})[j.arm] = j
    pairs = [(r[BASELINE], r[WRAPPER]) for _, r in sorted(by_repeat.items())
             if BASELINE in r and WRAPPER in r and r[BASELINE].step_ms and r[WRAPPER].step_ms]
    result = WidthResult(width, pairs, stability_problems(pairs))
    if not pairs:
        return result
    base, wrap = [b.step_ms for b, _ in pairs], [w.step_ms for _, w in pairs]
    result.baseline_ms, result.wrapper_ms = statistics.median(base), statistics.median(wrap)
    if len(pairs) >= 2:
        result.added_ms, result.ratio = paired_difference(wrap, base), paired_ratio(wrap, base)
        mem = [(b.train_mem, w.train_mem) for b, w in pairs if b.train_mem and w.train_mem]
        if len(mem) >= 2:
            result.mem_ratio = paired_ratio([w for _, w in mem], [b for b, _ in mem])
            result.mem_added = paired_difference([w / 2**20 for _, w in mem], [b / 2**20 for b, _ in mem])
    return result


def stability_problems(pairs: list[tuple[JobTiming, JobTiming]]) -> list[str]:
    """Why a width's pairs cannot be judged: too few, the pairs' ratios spread by UNSTABLE_SPREAD or more around
    their median, or the ratio drifting by UNSTABLE_DRIFT or more from the first pairs to the last. The machine's
    own level may drift (every job slower): the pairs, side by side, absorb that (`machine_drift` reports it)."""
    if len(pairs) < MIN_REPEATS:
        return [f"{len(pairs)} measured pair(s), fewer than {MIN_REPEATS}"]
    logs = [math.log(w.step_ms / b.step_ms) for b, w in pairs]
    problems = []
    spread = robust_sd(logs)
    if spread >= UNSTABLE_SPREAD:
        problems.append(f"the pairs' step-time ratios spread {100 * spread:.0f}% around their median")
    half = len(logs) // 2
    drift = statistics.fmean(logs[-half:]) - statistics.fmean(logs[:half])
    if len(logs) >= 4 and abs(drift) >= UNSTABLE_DRIFT:     # with fewer, a drift is one pair against another
        problems.append(f"the step-time ratio drifted {100 * drift:+.0f}% from the first pairs to the last")
    return problems


def machine_drift(pairs: list[tuple[JobTiming, JobTiming]]) -> float | None:
    """The relative change of both arms' step time from the first pair to the last (None: fewer than 2)."""
    if len(pairs) < 2:
        return None
    first, last = (pairs[0][0].step_ms + pairs[0][1].step_ms), (pairs[-1][0].step_ms + pairs[-1][1].step_ms)
    return last / first - 1


@dataclass
class Fit:
    """added ms per step = fixed + proportional x baseline ms per step, over the stable widths' pairs."""

    fixed: Paired
    proportional: Paired | None      # None: one width only, the whole cost taken as fixed
    at_reference: Paired             # added / step time, as a fraction, on a REFERENCE_STEP_MS model

    def text(self) -> str:
        line = f"{self.fixed.estimate:+.3f} ms/step [{self.fixed.low:+.3f}, {self.fixed.high:+.3f}]"
        if self.proportional is not None:
            p = self.proportional
            line += f" {100 * p.estimate:+.2f}% of the step [{100 * p.low:+.2f}, {100 * p.high:+.2f}]"
        r = self.at_reference
        return (line + f"; on a model whose step takes {REFERENCE_STEP_MS:.0f} ms that is {100 * r.estimate:+.2f}% "
                       f"[{100 * r.low:+.2f}, {100 * r.high:+.2f}]")


def fit_cost(widths: list[WidthResult]) -> Fit | None:
    points = [(b.step_ms, w.step_ms - b.step_ms) for r in widths if r.stable for b, w in r.pairs]
    distinct = {r.width for r in widths if r.stable}
    if len(points) < 2:
        return None
    x, y = np.array([p[0] for p in points]), np.array([p[1] for p in points])
    if len(distinct) < 2 or len(points) < 4:
        fixed = paired_difference(list(y), [0.0] * len(y))
        scale = REFERENCE_STEP_MS
        return Fit(fixed, None, Paired(fixed.estimate / scale, fixed.low / scale, fixed.high / scale, fixed.n))
    design = np.column_stack([np.ones_like(x), x])
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    df = len(points) - 2
    residual = y - design @ coef
    cov = (residual @ residual / df) * np.linalg.inv(design.T @ design)
    t = float(st.t.ppf(0.5 + LEVEL / 2, df))

    def paired(value: float, var: float) -> Paired:
        half = t * math.sqrt(max(var, 0.0))
        return Paired(value, value - half, value + half, len(points))

    fixed, prop = paired(coef[0], cov[0, 0]), paired(coef[1], cov[1, 1])
    ref = REFERENCE_STEP_MS
    total = paired(coef[0] + coef[1] * ref, cov[0, 0] + ref**2 * cov[1, 1] + 2 * ref * cov[0, 1])
    return Fit(fixed, prop, Paired(total.estimate / ref, total.low / ref, total.high / ref, total.n))


def startup_medians(jobs: list[JobTiming]) -> dict[str, dict[str, float]]:
    """arm -> milestone -> median seconds since the process started."""
    out: dict[str, dict[str, float]] = {}
    for arm in (BASELINE, WRAPPER):
        for m in MILESTONES:
            values = [j.startup[m] for j in jobs if j.arm == arm and m in j.startup]
            if values:
                out.setdefault(arm, {})[m] = statistics.median(values)
    return out
