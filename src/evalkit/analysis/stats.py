"""Difference, equivalence and budget tests on the log ratio wrapper/baseline (numpy + scipy only).

Every test works on log-scale samples and broadcasts over leading axes: `wrapper` shaped (..., n_w)
and `baseline` shaped (..., n_b) give one test per leading index, so a Monte-Carlo calibration runs
thousands of comparisons in one call. On the log scale a relative margin m becomes the symmetric
bound log(1 + m), and a difference d reads back as the ratio exp(d).

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


def p_equivalence(test: LogRatioTest, bound: float) -> np.ndarray:
    """Two one-sided tests (TOST) of H0: |log ratio| >= bound; small p shows equivalence."""
    return np.maximum(p_above(test, -bound), p_below(test, bound))


def interval(test: LogRatioTest, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Two-sided `level` t-interval of the log ratio (NaN when the df is undefined)."""
    half = stats.t.ppf(0.5 + level / 2.0, test.df) * test.se
    half = np.where(test.se == 0, 0.0, half)
    return test.estimate - half, test.estimate + half


def margin_bound(margin: float) -> float:
    """Relative margin (0.01 = 1%) as a symmetric bound on the log ratio."""
    if margin <= 0:
        raise ValueError(f"margin must be positive, got {margin}")
    return float(np.log1p(margin))


EQUIVALENT, DEVIATION, INCONCLUSIVE = "equivalent", "deviation", "inconclusive"


def classify(estimate, p_diff, p_equiv, bound: float, alpha: float) -> np.ndarray:
    """Outcome per comparison from (already multiplicity-adjusted) p-values.

    deviation: the difference is significant AND the estimate lies beyond the margin;
    equivalent: TOST rejects non-equivalence; anything else is inconclusive. A non-significant
    difference alone never yields "equivalent".
    """
    deviation = (np.asarray(p_diff) < alpha) & (np.abs(estimate) > bound)
    equivalent = (np.asarray(p_equiv) < alpha) & ~deviation
    out = np.full(np.shape(estimate), INCONCLUSIVE, dtype=object)
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
