"""How many seeds an inconclusive comparison would need, from the spread observed so far.

Plug-in planning: the observed estimate and spread are taken as the truth, and the smallest seed
count per arm is found whose approximate power reaches the target. When the estimate lies inside
the margin the aim is to show equivalence (TOST); otherwise to show the deviation (a significant
difference whose estimate also lies beyond the margin). The count is per arm, for one comparison,
before any multiplicity adjustment.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import stats

MAX_SEEDS = 1000


def seeds_needed(
    unit_sd: float,
    estimate: float,
    bound: float,
    alpha: float,
    paired: bool,
    power: float = 0.8,
    max_n: int = MAX_SEEDS,
) -> int | None:
    """Seeds per arm to decide at `power`; None when the spread is unknown or more than `max_n`.

    `unit_sd` is the log-scale spread of one unit of evidence (`LogRatioTest.unit_sd`), `estimate`
    the log ratio and `bound` the log-scale margin.
    """
    if not math.isfinite(unit_sd):
        return None
    n = np.arange(2, max_n + 1, dtype=float)
    if unit_sd == 0:
        reachable = abs(estimate) != bound
        return 2 if reachable else None
    se = unit_sd / np.sqrt(n)
    df = n - 1 if paired else 2 * n - 2
    if abs(estimate) < bound:
        achieved = _tost_power(abs(estimate), bound, se, df, alpha)
    else:
        achieved = _deviation_power(abs(estimate), bound, se, df, alpha)
    hits = np.flatnonzero(achieved >= power)
    return int(n[hits[0]]) if hits.size else None


def _tost_power(theta, bound, se, df, alpha):
    crit = stats.t.ppf(1 - alpha, df)
    upper = stats.t.cdf((bound - theta) / se - crit, df)
    lower = stats.t.cdf((bound + theta) / se - crit, df)
    return np.clip(upper + lower - 1.0, 0.0, 1.0)


def _deviation_power(theta, bound, se, df, alpha):
    """P(significant AND estimate beyond the margin) = P(estimate > max(bound, crit · se))."""
    crit = stats.t.ppf(1 - alpha / 2, df)
    return stats.t.cdf(theta / se - np.maximum(bound / se, crit), df)


def seeds_needed_one_sided(
    unit_sd: float, distance: float, alpha: float, paired: bool,
    power: float = 0.8, max_n: int = MAX_SEEDS,
) -> int | None:
    """Seeds per arm for a one-sided test to show the estimate lies `distance` (log scale) from a
    bound, e.g. a throughput ratio above its budget; None when unknown or more than `max_n`."""
    if not math.isfinite(unit_sd) or distance <= 0:
        return None
    if unit_sd == 0:
        return 2
    n = np.arange(2, max_n + 1, dtype=float)
    df = n - 1 if paired else 2 * n - 2
    achieved = stats.t.cdf(distance / (unit_sd / np.sqrt(n)) - stats.t.ppf(1 - alpha, df), df)
    hits = np.flatnonzero(achieved >= power)
    return int(n[hits[0]]) if hits.size else None
