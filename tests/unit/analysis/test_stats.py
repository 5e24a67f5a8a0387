"""Calibration of the analyzer's tests on synthetic data with a known truth (vectorised Monte-Carlo).

Every rate is printed (run pytest with -s) and repeated in the assertion message. Tolerances are
3 Monte-Carlo standard errors, so a test that is off by a few percentage points fails.
"""
import numpy as np
import pytest

from evalkit.analysis import planning, stats

ALPHA = 0.05
M = 20_000           # Monte-Carlo replications per scenario
MARGIN = 0.01        # ±1% relative, the default for the validation metric: the ratio lies in [0.99, 1.01]
LOWER, UPPER = stats.margin_bounds(MARGIN)


def mc_se(p: float, m: int = M) -> float:
    return float(np.sqrt(p * (1 - p) / m))


def arms(rng, shift: float, sd: float, n: int, paired: bool, seed_sd: float = 0.01, m: int = M):
    """Log values (m, n) of a baseline and a wrapper arm. Paired arms share a per-seed effect
    (same data order and init), which pairing removes; unpaired arms are independent."""
    if paired:
        seed_effect = rng.normal(0, seed_sd, (m, n))
        return seed_effect + shift + rng.normal(0, sd, (m, n)), seed_effect + rng.normal(0, sd, (m, n))
    return rng.normal(shift, sd, (m, n)), rng.normal(0, sd, (m, n))


def ratio_test(w, b, paired):
    return stats.paired_test(w, b) if paired else stats.welch_test(w, b)


def outcomes(w, b, paired, bounds=(LOWER, UPPER)):
    t = ratio_test(w, b, paired)
    return stats.classify(stats.p_beyond(t, *bounds), stats.p_equivalence(t, *bounds), ALPHA)


def rate(mask) -> float:
    return float(np.mean(mask))


@pytest.mark.parametrize("paired", [False, True])
def test_false_positive_rate_under_no_difference_stays_within_alpha(paired):
    rng = np.random.default_rng(1)
    w, b = arms(rng, shift=0.0, sd=0.003, n=5, paired=paired)
    fp = rate(stats.p_difference(ratio_test(w, b, paired)) < ALPHA)
    # With a margin far below the spread, "deviation" is as hard to avoid as significance itself.
    deviation = rate(outcomes(w, b, paired, bounds=stats.margin_bounds(0.0001)) == stats.DEVIATION)
    msg = (f"paired={paired}: significance-test FP rate {fp:.4f}, 'deviation' rate {deviation:.4f} "
           f"with a 0.01% margin (alpha {ALPHA})")
    print(msg)
    assert fp <= ALPHA + 3 * mc_se(ALPHA), msg
    assert fp >= ALPHA - 0.02, msg + " (far too conservative: the test has lost its size)"
    assert deviation <= ALPHA + 3 * mc_se(ALPHA), msg


@pytest.mark.parametrize("paired", [False, True])
def test_power_to_detect_one_percent_shift_with_five_seeds(paired):
    rng = np.random.default_rng(2)
    w, b = arms(rng, shift=np.log(1.01), sd=0.003, n=5, paired=paired)
    power = rate(stats.p_difference(ratio_test(w, b, paired)) < ALPHA)
    falsely_equivalent = rate(outcomes(w, b, paired) == stats.EQUIVALENT)
    msg = (f"paired={paired}: power {power:.4f} to detect a 1% shift (0.3% seed spread, 5 seeds/arm); "
           f"'equivalent' at the margin {falsely_equivalent:.4f}")
    print(msg)
    assert power >= 0.8, msg
    # A true ratio exactly at the margin is "equivalent" at most alpha of the time (TOST size).
    assert falsely_equivalent <= ALPHA + 3 * mc_se(ALPHA), msg


def test_no_difference_and_small_spread_reaches_equivalence():
    rng = np.random.default_rng(3)
    out = outcomes(*arms(rng, shift=0.0, sd=0.001, n=5, paired=False), paired=False)
    eq = rate(out == stats.EQUIVALENT)
    msg = f"'equivalent' rate {eq:.4f} with no difference, 0.1% spread, 5 seeds"
    print(msg)
    assert eq >= 0.95, msg


def test_difference_slightly_inside_margin_is_equivalent_or_inconclusive_never_deviation():
    rng = np.random.default_rng(4)
    out = outcomes(*arms(rng, shift=np.log(1.005), sd=0.002, n=5, paired=False), paired=False)
    eq, dev = rate(out == stats.EQUIVALENT), rate(out == stats.DEVIATION)
    msg = f"0.5% shift inside the 1% margin: equivalent {eq:.4f}, deviation {dev:.4f}"
    print(msg)
    assert 0.5 <= eq < 1.0, msg
    assert dev <= 3 * mc_se(ALPHA), msg


def test_difference_far_outside_margin_is_a_deviation():
    rng = np.random.default_rng(5)
    out = outcomes(*arms(rng, shift=np.log(1.03), sd=0.003, n=5, paired=False), paired=False)
    dev, eq = rate(out == stats.DEVIATION), rate(out == stats.EQUIVALENT)
    msg = f"3% shift, 1% margin: deviation {dev:.4f}, equivalent {eq:.4f}"
    print(msg)
    assert dev >= 0.99 and eq == 0.0, msg


def test_non_significant_difference_is_never_reported_as_equivalence():
    rng = np.random.default_rng(6)
    w, b = arms(rng, shift=0.0, sd=0.02, n=3, paired=False)    # noisy: nothing can be shown
    t = ratio_test(w, b, False)
    out = outcomes(w, b, False)
    low, high = stats.interval(t, 1 - 2 * ALPHA)
    eq = out == stats.EQUIVALENT
    msg = f"noisy arms: equivalent {rate(eq):.4f}, inconclusive {rate(out == stats.INCONCLUSIVE):.4f}"
    print(msg)
    assert rate(eq) <= ALPHA, msg
    assert np.all((low[eq] > LOWER) & (high[eq] < UPPER)), "equivalence without its interval inside the margin"


def test_holm_controls_family_wise_error_across_wrappers():
    """Six equivalent wrappers judged together: P(any false 'deviation' or significant difference) <= alpha."""
    rng = np.random.default_rng(7)
    m, k = 10_000, 6
    b = rng.normal(0, 0.003, (m, 1, 5))
    w = rng.normal(0, 0.003, (m, k, 5))
    t = stats.welch_test(w, np.broadcast_to(b, w.shape))
    p = stats.p_difference(t)
    raw = rate(np.any(p < ALPHA, axis=-1))
    fwer = rate(np.any(stats.holm(p) < ALPHA, axis=-1))
    msg = f"FWER over {k} null comparisons: unadjusted {raw:.4f}, Holm {fwer:.4f}"
    print(msg)
    assert fwer <= ALPHA + 3 * mc_se(ALPHA, m), msg
    assert raw > 2 * ALPHA, msg + " (the family is too small to show the need for Holm)"


def test_holm_adjusted_values_match_the_textbook_example():
    adjusted = stats.holm([0.01, 0.04, 0.03, 0.005])
    np.testing.assert_allclose(adjusted, [0.03, 0.06, 0.06, 0.02])
    assert stats.holm([np.nan, 0.01]).tolist() == [1.0, 0.02]


def test_bit_identical_arms_are_equivalent_and_constant_offsets_are_exact():
    same = np.log(np.full(5, 0.05))
    t = stats.paired_test(same, same)
    assert stats.p_equivalence(t, LOWER, UPPER) == 0.0 and stats.p_difference(t) == 1.0
    shifted = stats.paired_test(same + np.log(1.05), same)
    out = stats.classify(stats.p_beyond(shifted, LOWER, UPPER), stats.p_equivalence(shifted, LOWER, UPPER), ALPHA)
    assert out.item() == stats.DEVIATION
    one = stats.welch_test(same[:1], same[:1])  # one seed each: no noise estimate, nothing decided
    assert stats.p_difference(one) == 1.0 and stats.p_equivalence(one, LOWER, UPPER) == 1.0
    assert stats.p_beyond(one, LOWER, UPPER) == 1.0


def known_spread(shift: float, sd: float, paired: bool) -> stats.LogRatioTest:
    """A test whose estimate and spread are the truth (huge df): planning from it is planning from the truth."""
    unit_sd = sd * np.sqrt(2)   # one pair, or one seed of each arm
    return stats.LogRatioTest(np.array(shift), np.array(1e-9), np.array(1e9), np.array(unit_sd), np.array(5), paired)


@pytest.mark.parametrize("shift, sd, paired", [(np.log(1.003), 0.006, False), (0.0, 0.006, True)])
def test_seeds_needed_reaches_the_promised_power(shift, sd, paired):
    """Planning from the true spread: the recommended seed count decides ~80% of the time."""
    rng = np.random.default_rng(8)
    n = planning.seeds_needed(known_spread(shift, sd, paired), LOWER, UPPER, ALPHA, n_now=2)
    assert n is not None and n > 5, n
    m = 5_000
    eq = rate(outcomes(*arms(rng, shift, sd, n, paired, m=m), paired=paired) == stats.EQUIVALENT)
    eq_small = rate(outcomes(*arms(rng, shift, sd, max(n // 2, 2), paired, m=m), paired=paired) == stats.EQUIVALENT)
    msg = f"shift {shift:.4f}, sd {sd}: planned {n} seeds -> equivalent {eq:.3f}; half as many -> {eq_small:.3f}"
    print(msg)
    assert eq >= 0.75, msg
    assert eq_small < eq - 0.1, msg


def test_seeds_needed_for_a_deviation_and_the_undecidable_cases():
    rng = np.random.default_rng(10)
    shift, sd = np.log(1.02), 0.01
    n = planning.seeds_needed(known_spread(shift, sd, True), LOWER, UPPER, ALPHA, n_now=2)
    assert n is not None and 5 < n < 40, n
    dev = rate(outcomes(*arms(rng, shift, sd, n, True, m=5_000), paired=True) == stats.DEVIATION)
    print(f"2% shift, 1% sd: planned {n} seeds -> deviation {dev:.3f}")
    assert dev >= 0.75, (n, dev)
    nan_spread = stats.LogRatioTest(np.array(0.0), np.array(np.nan), np.array(np.nan), np.array(np.nan),
                                    np.array(1), True)
    assert planning.seeds_needed(nan_spread, LOWER, UPPER, ALPHA) is None
    on_margin = stats.LogRatioTest(np.array(UPPER), np.array(0.0), np.array(4.0), np.array(0.0), np.array(5), True)
    assert planning.seeds_needed(on_margin, LOWER, UPPER, ALPHA) is None  # no spread, exactly on the bound


@pytest.mark.parametrize("ratio, expect", [(0.97, "within"), (0.80, "outside"), (0.90, "at budget")])
def test_throughput_budget_one_sided_tests(ratio, expect):
    rng = np.random.default_rng(9)
    t = stats.welch_test(rng.normal(np.log(ratio), 0.02, (M, 5)), rng.normal(0.0, 0.02, (M, 5)))
    limit = np.log(0.9)
    within = rate(stats.p_above(t, limit) < ALPHA)
    outside = rate(stats.p_below(t, limit) < ALPHA)
    msg = f"throughput ratio {ratio}: shown within budget {within:.4f}, shown outside {outside:.4f}"
    print(msg)
    if expect == "within":
        assert within >= 0.95 and outside == 0.0, msg
    elif expect == "outside":
        assert outside >= 0.95 and within == 0.0, msg
    else:  # at the budget either claim is a false positive: each at most alpha
        assert max(within, outside) <= ALPHA + 3 * mc_se(ALPHA), msg
