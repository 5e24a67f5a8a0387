"""One wrapper arm against its baseline arm, per metric: equivalence within a margin, or a ratio
within an overhead budget. Outcomes are decided only after `adjust` has applied Holm's correction
over every comparison of the verdict (one family for "bad" claims, one for "good" claims).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from evalkit.analysis import planning
from evalkit.analysis.arms import Arm, ArmKey
from evalkit.analysis.noise import Spread, relative_transform, spread
from evalkit.analysis.stats import (
    DEVIATION,
    EQUIVALENT,
    INCONCLUSIVE,
    LogRatioTest,
    classify,
    holm,
    interval,
    margin_bound,
    p_above,
    p_below,
    p_difference,
    p_equivalence,
    paired_test,
    welch_test,
)

WITHIN, OUTSIDE = "within", "outside"
EQUIVALENCE, BUDGET = "equivalence", "budget"


@dataclass(frozen=True)
class MetricSpec:
    """A compared metric: its run-metric key, direction, and relative equivalence margin."""

    key: str
    higher_is_better: bool
    margin: float


@dataclass(frozen=True)
class Budget:
    """An overhead budget on a ratio wrapper/baseline: `ratio >= limit` when higher is better
    (throughput), `ratio <= limit` otherwise (memory)."""

    key: str
    label: str
    limit: float
    higher_is_better: bool


@dataclass
class Comparison:
    kind: str                 # EQUIVALENCE | BUDGET
    metric: str
    wrapper: ArmKey
    baseline: ArmKey
    paired: bool
    n: int                    # seed pairs when paired, else the smaller arm's sample count
    ratio: float              # wrapper / baseline
    ratio_low: float          # (1 - alpha) two-sided interval of the ratio
    ratio_high: float
    bound: float              # log-scale margin (equivalence) or log(limit) (budget)
    higher_is_better: bool
    p_good: float             # equivalence (TOST) or within budget, unadjusted
    p_bad: float              # any difference or outside budget, unadjusted
    unit_sd: float
    log_estimate: float
    noise_wrapper: Spread
    noise_baseline: Spread
    p_good_adj: float = float("nan")
    p_bad_adj: float = float("nan")
    outcome: str = INCONCLUSIVE
    seeds_needed: int | None = None

    @property
    def delta(self) -> float:
        return self.ratio - 1.0

    @property
    def margin(self) -> float:
        return float(np.expm1(self.bound))


def compare_metric(wrapper: Arm, baseline: Arm, spec: MetricSpec, alpha: float) -> Comparison | None:
    """Equivalence comparison of final values; seeds are paired when both arms share two or more."""
    w, b = wrapper.samples(spec.key), baseline.samples(spec.key)
    if not len(w) or not len(b):
        return None
    forward, back = relative_transform(w.values, b.values)
    w_seeds, w_means = w.per_seed(forward)
    b_seeds, b_means = b.per_seed(forward)
    shared, wi, bi = np.intersect1d(w_seeds, b_seeds, return_indices=True)
    if len(shared) >= 2:
        test = paired_test(w_means[wi], b_means[bi])
    else:
        test = welch_test(w_means, b_means)
    bound = margin_bound(spec.margin)
    return _comparison(EQUIVALENCE, spec.key, wrapper, baseline, test, bound, spec.higher_is_better,
                       p_equivalence(test, bound), p_difference(test), alpha, back,
                       spread(w, forward), spread(b, forward))


def compare_budget(wrapper: Arm, baseline: Arm, budget: Budget, alpha: float) -> Comparison | None:
    """Budget comparison of a positive summary (throughput, memory) over runs, unpaired: timing
    noise does not follow the seed."""
    w, b = wrapper.samples(budget.key), baseline.samples(budget.key)
    if not len(w) or not len(b) or np.any(w.values <= 0) or np.any(b.values <= 0):
        return None
    test = welch_test(np.log(w.values), np.log(b.values))
    bound = float(np.log(budget.limit))
    above, below = p_above(test, bound), p_below(test, bound)
    good, bad = (above, below) if budget.higher_is_better else (below, above)
    return _comparison(BUDGET, budget.key, wrapper, baseline, test, bound, budget.higher_is_better,
                       good, bad, alpha, lambda d: float(np.expm1(d)),
                       spread(w), spread(b))


def _comparison(kind, metric, wrapper, baseline, test: LogRatioTest, bound, higher, good, bad,
                alpha, back, noise_w, noise_b) -> Comparison:
    low, high = interval(test, 1 - alpha)
    return Comparison(
        kind=kind, metric=metric, wrapper=wrapper.key, baseline=baseline.key, paired=test.paired,
        n=int(test.n), ratio=1 + back(float(test.estimate)), ratio_low=1 + back(float(low)),
        ratio_high=1 + back(float(high)), bound=bound, higher_is_better=higher,
        p_good=float(good), p_bad=float(bad), unit_sd=float(test.unit_sd),
        log_estimate=float(test.estimate), noise_wrapper=noise_w, noise_baseline=noise_b,
    )


def adjust(comparisons: list[Comparison], alpha: float) -> None:
    """Holm over all comparisons (good and bad claims as two families), then decide outcomes."""
    if not comparisons:
        return
    good = holm([c.p_good for c in comparisons])
    bad = holm([c.p_bad for c in comparisons])
    for c, p_good, p_bad in zip(comparisons, good, bad):
        c.p_good_adj, c.p_bad_adj = float(p_good), float(p_bad)
        c.outcome = _decide(c, alpha)
        if c.outcome == INCONCLUSIVE:
            c.seeds_needed = _plan(c, alpha)


def _decide(c: Comparison, alpha: float) -> str:
    if c.kind == EQUIVALENCE:
        return classify(c.log_estimate, c.p_bad_adj, c.p_good_adj, c.bound, alpha).item()
    if c.p_good_adj < alpha:
        return WITHIN
    return OUTSIDE if c.p_bad_adj < alpha else INCONCLUSIVE


def _plan(c: Comparison, alpha: float) -> int | None:
    if c.kind == EQUIVALENCE:
        return planning.seeds_needed(c.unit_sd, c.log_estimate, c.bound, alpha, c.paired)
    distance = abs(c.log_estimate - c.bound)
    return planning.seeds_needed_one_sided(c.unit_sd, distance, alpha, c.paired)


__all__ = ["Budget", "Comparison", "MetricSpec", "compare_budget", "compare_metric", "adjust",
           "EQUIVALENT", "DEVIATION", "INCONCLUSIVE", "WITHIN", "OUTSIDE", "EQUIVALENCE", "BUDGET"]
