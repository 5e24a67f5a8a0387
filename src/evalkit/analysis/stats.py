"""Difference, equivalence and budget tests on the log ratio wrapper/baseline (numpy + scipy only).

Every test works on transformed samples and broadcasts over leading axes: `wrapper` shaped (..., n_w)
and `baseline` shaped (..., n_b) give one test per leading index, so a Monte-Carlo calibration runs
thousands of comparisons in one call. The scale is declared per metric, never guessed from the data:
relative (log values; a margin m is the ratio interval [1 - m, 1 + m], i.e. the bounds log(1 - m) and
log(1 + m), and a difference d reads back as the ratio exp(d)) or absolute (plain values; the margin
is ±m in the metric's units).

Claims and the interval that decides each (a = the per-comparison level after Holm):
- equivalent: two one-sided tests at a, i.e. the (1 - 2a) interval lies inside the bounds;
- deviation (beyond the margin): a one-sided test at a/2 against the nearer bound, i.e. the (1 - a)
  interval lies entirely beyond one bound;
- budget within / outside: one one-sided test at a each, i.e. the (1 - 2a) interval on one side.

Degenerate spread (bit-identical runs, common with aligned wrappers) is handled exactly: with a
standard error of zero the interval collapses to the point estimate and each one-sided p-value is
0 or 1.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats


@dataclass(frozen=True)
class LogRatioTest:
    """Mean log ratio wrapper/baseline with its standard error and degrees of freedom.

    `unit_sd` is the spread of one unit of evidence (one seed pair when paired, the combined
    spread of one wrapper and one baseline seed otherwise): what sample-size planning scales.
    """

    estimate: np.ndarray
    se: np.ndarray
    df: np.ndarray
    unit_sd: np.ndarray
    n: np.ndarray          # pairs when paired, else seeds per arm (the smaller arm)
    paired: bool


def paired_test(wrapper: np.ndarray, baseline: np.ndarray) -> LogRatioTest:
    """Paired t statistics on log values of the same seeds (last axis = seed, same order)."""
    diff = np.asarray(wrapper, float) - np.asarray(baseline, float)
    n = diff.shape[-1]
    sd = _sd(diff)
    return LogRatioTest(
        estimate=diff.mean(axis=-1),
        se=sd / np.sqrt(n),
        df=np.full(sd.shape, n - 1.0) if n > 1 else np.full(sd.shape, np.nan),
        unit_sd=sd,
        n=np.full(sd.shape, n),
        paired=True,
    )


def welch_test(wrapper: np.ndarray, baseline: np.ndarray) -> LogRatioTest:
    """Welch (unequal-variance) t statistics on log values of two independent arms."""
    w, b = np.asarray(wrapper, float), np.asarray(baseline, float)
    n_w, n_b = w.shape[-1], b.shape[-1]
    var_w, var_b = _sd(w) ** 2, _sd(b) ** 2
    a, c = var_w / n_w, var_b / n_b
    se = np.sqrt(a + c)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = (a + c) ** 2 / (a**2 / (n_w - 1) + c**2 / (n_b - 1))
    # Both arms without spread: Welch's df is 0/0; the pooled df is the honest count.
    df = np.where((a + c) == 0, n_w + n_b - 2.0, df)
    if min(n_w, n_b) < 2:
        df = np.full(np.shape(se), np.nan)
    return LogRatioTest(
        estimate=w.mean(axis=-1) - b.mean(axis=-1),
        se=se,
        df=df,
        unit_sd=np.sqrt(var_w + var_b),
        n=np.full(np.shape(se), min(n_w, n_b)),
        paired=False,
    )


def _sd(x: np.ndarray) -> np.ndarray:
    if x.shape[-1] < 2:
        return np.full(x.shape[:-1], np.nan)
    return x.std(axis=-1, ddof=1)


def _upper_tail(distance: np.ndarray, test: LogRatioTest) -> np.ndarray:
    """P(T >= distance / se) under a t(df); exact 0/1 when se == 0; 1 when undefined."""
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.asarray(distance, float) / test.se
    p = stats.t.sf(t, test.df)
    return np.where(np.isnan(p), 1.0, p)


def p_difference(test: LogRatioTest) -> np.ndarray:
    """Two-sided p-value of H0: no difference (log ratio = 0)."""
    p = 2.0 * _upper_tail(np.abs(test.estimate), test)
    return np.where(test.estimate == 0, 1.0, np.minimum(p, 1.0))


def p_above(test: LogRatioTest, bound: float) -> np.ndarray:
    """One-sided p-value of H0: log ratio <= bound (small p: the ratio is shown above exp(bound))."""
    return _upper_tail(test.estimate - bound, test)


def p_below(test: LogRatioTest, bound: float) -> np.ndarray:
    """One-sided p-value of H0: log ratio >= bound (small p: the ratio is shown below exp(bound))."""
    return _upper_tail(bound - test.estimate, test)


def p_equivalence(test: LogRatioTest, lower: float, upper: float) -> np.ndarray:
    """Two one-sided tests (TOST) of H0: the difference lies outside (lower, upper); small p shows
    equivalence."""
    return np.maximum(p_above(test, lower), p_below(test, upper))


def p_beyond(test: LogRatioTest, lower: float, upper: float) -> np.ndarray:
    """H0: the difference lies inside [lower, upper]; small p shows it beyond. One-sided against the
    nearer bound, times the number of finite bounds: when either side may be claimed (a margin), each
    gets half the level; a budget (one infinite bound) has one side only."""
    sides = int(np.isfinite(lower)) + int(np.isfinite(upper))
    return np.minimum(sides * np.minimum(p_above(test, upper), p_below(test, lower)), 1.0)


def interval(test: LogRatioTest, level) -> tuple[np.ndarray, np.ndarray]:
    """Two-sided `level` t-interval of the difference (NaN when the df is undefined)."""
    half = stats.t.ppf(0.5 + np.asarray(level) / 2.0, test.df) * test.se
    half = np.where(test.se == 0, 0.0, half)
    return test.estimate - half, test.estimate + half


RELATIVE, ABSOLUTE = "relative", "absolute"
SCALES = (RELATIVE, ABSOLUTE)
MARGIN_RULE = ("the margin must be a positive number (a fraction for a relative metric, 0.01 = ±1 %; "
               "metric units for an absolute one)")


def check_margin(margin: float, what: str = "margin") -> float:
    """`margin` as a float; ValueError with MARGIN_RULE (the CLI's words) unless positive and finite."""
    try:
        value = float(margin)
    except (TypeError, ValueError):
        value = float("nan")
    if not (np.isfinite(value) and value > 0):
        raise ValueError(f"{what}: {MARGIN_RULE}, got {margin!r}")
    return value


def margin_bounds(margin: float, scale: str = RELATIVE) -> tuple[float, float]:
    """(lower, upper) bounds of the margin on the test scale: relative m is the ratio interval
    [1 - m, 1 + m] on the log scale (log(1 - m), log(1 + m)); absolute m is (-m, m)."""
    m = check_margin(margin)
    if scale == ABSOLUTE:
        return -m, m
    if scale != RELATIVE:
        raise ValueError(f"unknown metric scale {scale!r}; choose from {', '.join(SCALES)}")
    return (float(np.log1p(-m)) if m < 1 else -np.inf), float(np.log1p(m))


EQUIVALENT, DEVIATION, INCONCLUSIVE = "equivalent", "deviation", "inconclusive"


def classify(p_bad, p_good, alpha: float) -> np.ndarray:
    """Outcome per comparison from (already multiplicity-adjusted) p-values of the two claims.

    deviation: `p_beyond` shows the difference beyond the margin; equivalent: `p_equivalence` shows
    it inside; anything else is inconclusive. A non-significant difference alone never yields
    "equivalent", and a significant one alone never yields "deviation".
    """
    deviation = np.asarray(p_bad) < alpha
    equivalent = (np.asarray(p_good) < alpha) & ~deviation
    out = np.full(np.shape(deviation), INCONCLUSIVE, dtype=object)
    out[equivalent] = EQUIVALENT
    out[deviation] = DEVIATION
    return out


def holm(p_values) -> np.ndarray:
    """Holm step-down adjusted p-values along the last axis (NaN counts as 1)."""
    p = np.nan_to_num(np.asarray(p_values, float), nan=1.0)
    m = p.shape[-1]
    if m == 0:
        return p
    order = np.argsort(p, axis=-1)
    ranked = np.take_along_axis(p, order, axis=-1) * (m - np.arange(m))
    ranked = np.minimum(np.maximum.accumulate(ranked, axis=-1), 1.0)
    adjusted = np.empty_like(ranked)
    np.put_along_axis(adjusted, order, ranked, axis=-1)
    return adjusted
