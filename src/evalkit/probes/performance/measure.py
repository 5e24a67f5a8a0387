"""The performance probe's numbers: per job what its summary says, per width the paired comparison, over the
widths the fit `added = fixed + proportional x baseline step time`.

Every interval is a two-sided t interval over the repeats, paired by repeat (a baseline job and the wrapper job
run next to it): ratios on the log scale, differences in milliseconds. A width whose jobs are unstable (too few
repeats, a spread of the per-job medians of 10 % or more, a drift of 10 % or more between the first and the last
repeat) is reported as such and left out of the judgement and the fit.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

import numpy as np
from scipy import stats as st

from evalkit.analysis.stats import interval, paired_test
from evalkit.names import STARTUP_MILESTONES as MILESTONES
from evalkit.probes.evidence import JobEvidence
from evalkit.probes.performance.plan import BASELINE, WRAPPER, parse_name

LEVEL = 0.95
MIN_REPEATS = 3
UNSTABLE_SPREAD = 0.10      # coefficient of variation of an arm's per-job medians
UNSTABLE_DRIFT = 0.10       # relative change of an arm's median step time, first repeat to last
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
    if len(pairs) < MIN_REPEATS:
        return [f"{len(pairs)} measured pair(s), fewer than {MIN_REPEATS}"]
    problems = []
    for i, arm in enumerate((BASELINE, WRAPPER)):
        times = [p[i].step_ms for p in pairs]
        median = statistics.median(times)
        spread = statistics.stdev(times) / median
        drift = abs(times[-1] - times[0]) / median
        if spread >= UNSTABLE_SPREAD:
            problems.append(f"{arm} spread {100 * spread:.0f}% of its median step time")
        if drift >= UNSTABLE_DRIFT:
            problems.append(f"{arm} drifted {100 * drift:.0f}% from the first repeat to the last")
    return problems


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
