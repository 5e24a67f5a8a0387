"""One wrapper arm against its baseline arm, per metric: equivalence within a margin, or a ratio
within an overhead budget. Outcomes are decided only after `adjust` has applied Holm's correction
over every comparison of the verdict (one family for "good" claims, one for "bad" claims); each
comparison then shows the interval its decision used, at the level Holm left it (see `stats`).

Final metrics are averaged over repeats within a seed, then tested by the designs of `design`
(paired, unpaired, or the stronger of both under Bonferroni). A wrapper arm with a non-finite run
(NaN or inf loss or metric) is not tested at all: its outcome is `NONFINITE`, and it stays out of
Holm's families.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import stats as sps

from evalkit.analysis import planning
from evalkit.analysis.arms import Arm, ArmKey, Samples, shared_seeds
from evalkit.analysis.design import PAIRED, UNPAIRED, Design, claim_p_values, designs
from evalkit.analysis.finite import NonFinite, nonfinite_runs
from evalkit.analysis.noise import Spread, spread
from evalkit.analysis.stats import (
    ABSOLUTE,
    DEVIATION,
    EQUIVALENT,
    INCONCLUSIVE,
    RELATIVE,
    SCALES,
    check_margin,
    classify,
    holm,
    interval,
    margin_bounds,
    p_beyond,
    p_equivalence,
    welch_test,
)

WITHIN, OUTSIDE = "within", "outside"
NONFINITE = "non-finite"
EQUIVALENCE, BUDGET = "equivalence", "budget"


@dataclass(frozen=True)
class MetricSpec:
    """A compared metric: its run-metric key, direction, margin and declared scale (relative: the
    margin is a fraction of the baseline, for positive metrics; absolute: in the metric's units, for
    metrics that can be zero or negative)."""

    key: str
    higher_is_better: bool
    margin: float
    scale: str = RELATIVE

    def __post_init__(self):
        object.__setattr__(self, "margin", check_margin(self.margin, self.key))
        if self.scale not in SCALES:
            raise ValueError(f"{self.key}: unknown metric scale {self.scale!r}; choose from {', '.join(SCALES)}")


@dataclass(frozen=True)
class Budget:
    """An overhead budget on a ratio wrapper/baseline: `ratio >= limit` when higher is better
    (throughput), `ratio <= limit` otherwise (memory)."""

    key: str
    label: str
    limit: float
    higher_is_better: bool

    @property
    def bounds(self) -> tuple[float, float]:
        bound = math.log(self.limit)
        return (bound, math.inf) if self.higher_is_better else (-math.inf, bound)


@dataclass
class Comparison:
    kind: str                 # EQUIVALENCE | BUDGET
    metric: str
    wrapper: ArmKey
    baseline: ArmKey
    scale: str                # RELATIVE: estimates read as ratios; ABSOLUTE: as differences
    higher_is_better: bool
    margin: float             # the declared margin (fraction or metric units) or the budget's limit ratio
    bounds: tuple[float, float]   # where "good" lies, on the test scale (log for relative)
    designs: list[Design]
    shared: int               # seeds both arms ran
    p_good: float             # equivalence (TOST) or within budget, unadjusted (Bonferroni over designs)
    p_bad: float              # beyond the margin or outside the budget, unadjusted
    noise_wrapper: Spread
    noise_baseline: Spread
    nonfinite: list[NonFinite] = field(default_factory=list)   # wrapper runs that went NaN/inf
    p_good_adj: float = float("nan")
    p_bad_adj: float = float("nan")
    outcome: str = INCONCLUSIVE
    seeds_needed: int | None = None
    plan_alpha: float = float("nan")   # the per-test level the seeds-needed plan aims at (Holm's first step)
    # The shown design and interval: the one the decision used, at its level (set by `show`).
    design: str = ""
    n: int = 0                # pairs when paired, else the smaller arm's seed count
    estimate: float = float("nan")     # on the test scale
    low: float = float("nan")
    high: float = float("nan")
    level: float = float("nan")        # confidence level of [low, high]
    unit_sd: float = float("nan")

    @property
    def paired(self) -> bool:
        return self.design == PAIRED

    @property
    def candidates(self) -> int:
        return len(self.designs)

    def back(self, value: float) -> float:
        """A test-scale value as printed: relative change (ratio - 1) or absolute difference."""
        return float(np.expm1(value)) if self.scale == RELATIVE else float(value)

    @property
    def delta(self) -> float:
        return self.back(self.estimate)

    @property
    def delta_low(self) -> float:
        return self.back(self.low)

    @property
    def delta_high(self) -> float:
        return self.back(self.high)

    @property
    def ratio(self) -> float:
        return 1.0 + self.delta

    @property
    def ratio_low(self) -> float:
        return 1.0 + self.delta_low

    @property
    def ratio_high(self) -> float:
        return 1.0 + self.delta_high

    def design_text(self) -> str:
        """'paired, 5 seeds', 'unpaired, 10+10 seeds', and which other design competed, if one did
        (budgets count runs: timing noise does not follow the seed)."""
        if not self.designs:
            return "no test"
        unit = "runs" if self.kind == BUDGET else "seeds"
        shown = next(d for d in self.designs if d.name == self.design)
        text = _design_words(shown, unit)
        others = [d for d in self.designs if d is not shown]
        if others:
            other = others[0]
            what = (f"paired on the {other.n_wrapper} shared seeds" if other.name == PAIRED
                    else f"unpaired on all {other.n_wrapper}+{other.n_baseline} seeds")
            text += f" (best of this and {what}, Bonferroni x{len(self.designs)})"
        return text


def _design_words(d: Design, unit: str = "seeds") -> str:
    if d.name == PAIRED:
        unshared = f" ({d.left_out} unshared seed{'s' if d.left_out > 1 else ''} left out)" if d.left_out else ""
        return f"paired, {d.n_wrapper} seeds{unshared}"
    return f"unpaired, {d.n_wrapper}+{d.n_baseline} {unit}"


def transform(scale: str):
    return np.log if scale == RELATIVE else (lambda x: np.asarray(x, float))


def scale_problem(values: list[np.ndarray], spec: MetricSpec) -> str | None:
    """Why `spec`'s declared scale cannot judge these values (a relative margin needs positive ones)."""
    if spec.scale == RELATIVE and any(np.any(np.asarray(v) <= 0) for v in values):
        return (f"{spec.key} has values <= 0: a relative margin needs positive values "
                "(declare the metric's scale absolute)")
    return None


def compare_metric(wrapper: Arm, baseline: Arm, spec: MetricSpec, alpha: float) -> Comparison | None:
    """Equivalence comparison of final values (see the module docstring for the designs); None when
    an arm has no value at all. ValueError when the declared scale cannot judge the values."""
    w, b = wrapper.samples(spec.key), baseline.samples(spec.key)
    diverged = nonfinite_runs(wrapper.finished, spec.key)
    if not diverged and (not len(w) or not len(b)):
        return None
    problem = None if diverged else scale_problem([w.values, b.values], spec)
    if problem:
        raise ValueError(problem)
    forward = transform(spec.scale)
    lower, upper = margin_bounds(spec.margin, spec.scale)
    tests: list[Design] = []
    shared = 0
    if not diverged:
        w_ids, w_means = w.per_seed(forward)
        b_ids, b_means = b.per_seed(forward)
        tests = designs(w_ids, w_means, b_ids, b_means)
        shared = len(shared_seeds(w_ids, b_ids)[0])
    c = _comparison(EQUIVALENCE, spec.key, wrapper, baseline, spec.scale, spec.higher_is_better, spec.margin,
                    (lower, upper), tests, shared, w, b, forward)
    if diverged:
        c.nonfinite, c.outcome, c.n = diverged, NONFINITE, len(wrapper.finished)
    else:
        show(c, alpha)
    return c


def compare_budget(wrapper: Arm, baseline: Arm, budget: Budget, alpha: float) -> Comparison | None:
    """Budget comparison of a positive summary (throughput, memory) over runs, unpaired: timing
    noise does not follow the seed."""
    w, b = wrapper.samples(budget.key), baseline.samples(budget.key)
    if not len(w) or not len(b) or np.any(w.values <= 0) or np.any(b.values <= 0):
        return None
    tests = [Design(UNPAIRED, welch_test(np.log(w.values), np.log(b.values)), len(w), len(b))]
    c = _comparison(BUDGET, budget.key, wrapper, baseline, RELATIVE, budget.higher_is_better, budget.limit,
                    budget.bounds, tests, 0, w, b, np.log)
    show(c, alpha)
    return c


def _comparison(kind, metric, wrapper: Arm, baseline: Arm, scale, higher, margin, bounds, tests, shared,
                w: Samples, b: Samples, forward) -> Comparison:
    p_good, p_bad = claim_p_values(tests, *bounds) if tests else (np.nan, np.nan)
    return Comparison(
        kind=kind, metric=metric, wrapper=wrapper.key, baseline=baseline.key, scale=scale,
        higher_is_better=higher, margin=float(margin), bounds=(float(bounds[0]), float(bounds[1])),
        designs=tests, shared=shared, p_good=float(p_good), p_bad=float(p_bad),
        noise_wrapper=spread(w, forward), noise_baseline=spread(b, forward),
    )


def adjust(comparisons: list[Comparison], alpha: float) -> None:
    """Holm over all tested comparisons (good and bad claims as two families), then decide outcomes,
    show each decision's interval, and plan the seeds for the undecided ones."""
    tested = [c for c in comparisons if c.outcome != NONFINITE]
    if not tested:
        return
    good = holm([c.p_good for c in tested])
    bad = holm([c.p_bad for c in tested])
    for c, p_good, p_bad in zip(tested, good, bad):
        c.p_good_adj, c.p_bad_adj = float(p_good), float(p_bad)
        c.outcome = _decide(c, alpha)
        show(c, alpha, len(tested))
        c.seeds_needed = _plan(c, alpha, len(tested)) if c.outcome == INCONCLUSIVE else None


def _decide(c: Comparison, alpha: float) -> str:
    outcome = classify(c.p_bad_adj, c.p_good_adj, alpha).item()
    if c.kind == BUDGET:
        return {EQUIVALENT: WITHIN, DEVIATION: OUTSIDE}.get(outcome, INCONCLUSIVE)
    return outcome


def holm_level(p: float, p_adj: float, alpha: float, m: int) -> float:
    """The level this p-value was effectively compared with: p_adj < alpha exactly when p < it."""
    if not (p > 0 and p_adj > 0) or not math.isfinite(p_adj):
        return alpha / m
    return alpha * p / p_adj


def show(c: Comparison, alpha: float, m: int = 1) -> None:
    """Set the design and interval the outcome rests on: the good claim's (1 - 2a) interval when shown,
    the bad claim's when shown, else the stronger design's wider one (which then crosses a bound)."""
    k, sides = c.candidates, int(np.isfinite(c.bounds[0])) + int(np.isfinite(c.bounds[1]))
    p_good_adj = c.p_good_adj if math.isfinite(c.p_good_adj) else c.p_good
    p_bad_adj = c.p_bad_adj if math.isfinite(c.p_bad_adj) else c.p_bad
    good_level = 1 - 2 * holm_level(c.p_good, p_good_adj, alpha, m) / k
    bad_level = 1 - 2 * holm_level(c.p_bad, p_bad_adj, alpha, m) / (k * sides)
    if c.outcome in (EQUIVALENT, WITHIN):
        index, level = _argmin([p_equivalence(d.test, *c.bounds) for d in c.designs]), good_level
    elif c.outcome in (DEVIATION, OUTSIDE):
        index, level = _argmin([p_beyond(d.test, *c.bounds) for d in c.designs]), bad_level
    else:
        index, level = _stronger(c.designs, alpha), max(good_level, bad_level)
    d = c.designs[index]
    low, high = interval(d.test, level)
    c.design, c.n, c.level = d.name, int(d.test.n), float(level)
    c.estimate, c.low, c.high = float(d.test.estimate), float(low), float(high)
    c.unit_sd = float(d.test.unit_sd)


def _argmin(values) -> int:
    return int(np.argmin([float(v) for v in values]))


def _stronger(tests: list[Design], alpha: float) -> int:
    """The design with the narrower interval at 1 - alpha (an undefined one counts as infinite)."""
    widths = [float(np.nan_to_num(sps.t.ppf(1 - alpha / 2, d.test.df) * d.test.se, nan=np.inf)) for d in tests]
    return int(np.argmin(widths))


def _plan(c: Comparison, alpha: float, m: int) -> int | None:
    """Seeds per arm that decide this comparison with 80 % assurance at Holm's first step (alpha/m,
    the level a re-run must reach whatever the other comparisons do), within its Bonferroni split."""
    d = next(d for d in c.designs if d.name == c.design)
    c.plan_alpha = alpha / m / c.candidates
    return planning.seeds_needed(d.test, *c.bounds, c.plan_alpha, n_now=c.n)


__all__ = ["Budget", "Comparison", "Design", "MetricSpec", "adjust", "claim_p_values", "compare_budget",
           "compare_metric", "designs", "holm_level", "scale_problem", "show", "ABSOLUTE", "BUDGET",
           "DEVIATION", "EQUIVALENCE", "EQUIVALENT", "INCONCLUSIVE", "NONFINITE", "OUTSIDE", "PAIRED",
           "RELATIVE", "UNPAIRED", "WITHIN"]
