"""Calibration of the decisions the verdict prints (issue 11), by vectorised Monte-Carlo.

Every cell draws M comparisons with a known truth and runs them through the analyzer's own decision
functions (`compare.designs` -> `compare.claim_p_values` -> Holm -> `stats.classify`, and the planner
`adjust` calls); the last test drives whole families through `compare_metric` + `adjust`. Cells: 3, 5
and 10 seeds; seed spread 0.3 % and 1 %; normal, skewed (lognormal) and heavy-tailed (t3) noise;
paired and unpaired. Rates are printed (pytest -s) and repeated in assertion messages; thresholds
sit 3 Monte-Carlo standard errors from the target, and every generator has a fixed seed.
"""
import itertools

import numpy as np
import pytest

from evalkit.analysis import compare, planning, stats
from evalkit.analysis.arms import Arm, ArmKey
from evalkit.analysis.records import RunRecord

ALPHA = 0.05
M = 2_000
LOWER, UPPER = stats.margin_bounds(0.01)        # the ratio lies in [0.99, 1.01]
SEEDS, SPREADS, NOISES = (3, 5, 10), (0.003, 0.01), ("normal", "lognormal", "t3")
SEED_EFFECT = 0.02                               # shared by both arms of a paired draw (same data order)


def mc_se(p: float, m: int = M) -> float:
    return float(np.sqrt(p * (1 - p) / m))


def noise(rng, kind: str, shape) -> np.ndarray:
    """Standardised draws (mean 0, sd 1) of the given shape."""
    if kind == "normal":
        return rng.standard_normal(shape)
    if kind == "lognormal":
        s = 0.75
        return (rng.lognormal(0, s, shape) - np.exp(s**2 / 2)) / np.sqrt((np.exp(s**2) - 1) * np.exp(s**2))
    return rng.standard_t(3, shape) / np.sqrt(3.0)


def draw(rng, n, shift, spread, paired, kind, m=M, arms=1):
    """(designs, ...) for m draws of `arms` wrappers against one baseline: per-seed log values."""
    ids_w = np.arange(n)
    ids_b = ids_w if paired else np.arange(100, 100 + n)
    seed = rng.normal(0, SEED_EFFECT, (m, 1, n)) if paired else 0.0
    w = seed + shift + spread * noise(rng, kind, (m, arms, n))
    b = seed + spread * noise(rng, kind, (m, 1, n))
    return compare.designs(ids_w, w, ids_b, np.broadcast_to(b, w.shape))


def decide(tests, alpha=ALPHA):
    p_good, p_bad = compare.claim_p_values(tests, LOWER, UPPER)
    return stats.classify(stats.holm(p_bad), stats.holm(p_good), alpha)


def grid():
    return itertools.product(SEEDS, SPREADS, NOISES, (True, False))


def rate(mask) -> float:
    return float(np.mean(mask))


def test_no_shift_false_deviation_and_significance_stay_within_alpha():
    rng = np.random.default_rng(101)
    worst_fp, worst_dev = 0.0, 0.0
    for n, spread, kind, paired in grid():
        tests = draw(rng, n, 0.0, spread, paired, kind)
        fp = rate(stats.p_difference(tests[0].test) < ALPHA)
        dev = rate(decide(tests) == stats.DEVIATION)
        print(f"no shift  n={n:2d} spread={spread:.3f} {kind:9s} paired={paired!s:5s}: "
              f"significance FP {fp:.3f}, false 'deviation' {dev:.3f}")
        worst_fp, worst_dev = max(worst_fp, fp), max(worst_dev, dev)
    print(f"worst significance FP {worst_fp:.3f}, worst false deviation {worst_dev:.3f} (alpha {ALPHA})")
    assert worst_fp <= ALPHA + 3 * mc_se(ALPHA), worst_fp
    assert worst_dev <= ALPHA / 2 + 3 * mc_se(ALPHA / 2), worst_dev


@pytest.mark.parametrize("bound", [LOWER, UPPER], ids=["ratio 0.99", "ratio 1.01"])
def test_a_true_ratio_on_the_margin_is_called_equivalent_at_most_alpha(bound):
    rng = np.random.default_rng(102)
    worst = 0.0
    for n, spread, kind, paired in grid():
        eq = rate(decide(draw(rng, n, bound, spread, paired, kind)) == stats.EQUIVALENT)
        worst = max(worst, eq)
        print(f"on margin {np.expm1(bound):+.3f} n={n:2d} spread={spread:.3f} {kind:9s} paired={paired!s:5s}: "
              f"'equivalent' {eq:.3f}")
    print(f"worst 'equivalent' on the margin {worst:.3f} (alpha {ALPHA})")
    assert worst <= ALPHA + 3 * mc_se(ALPHA), worst


def test_a_half_percent_shift_with_one_percent_spread_is_not_a_deviation():
    """Item 9: the old rule (significant AND estimate beyond) fired 7.7-13 % here."""
    rng = np.random.default_rng(103)
    worst = 0.0
    for n, kind, paired in itertools.product(SEEDS, NOISES, (True, False)):
        dev = rate(decide(draw(rng, n, np.log(1.005), 0.01, paired, kind)) == stats.DEVIATION)
        worst = max(worst, dev)
        print(f"+0.5% shift, 1% spread n={n:2d} {kind:9s} paired={paired!s:5s}: 'deviation' {dev:.3f}")
    print(f"worst false 'deviation' on a +0.5% shift: {worst:.3f} (target <= alpha/2 = {ALPHA / 2})")
    assert worst <= ALPHA / 2 + 3 * mc_se(ALPHA / 2), worst


def test_power_to_call_a_two_percent_shift_a_deviation():
    rng = np.random.default_rng(104)
    for n, spread, kind, paired in grid():
        tests = draw(rng, n, np.log(1.02), spread, paired, kind)
        dev = rate(decide(tests) == stats.DEVIATION)
        eq = rate(decide(tests) == stats.EQUIVALENT)
        print(f"+2% shift n={n:2d} spread={spread:.3f} {kind:9s} paired={paired!s:5s}: 'deviation' {dev:.3f}, "
              f"'equivalent' {eq:.3f}")
        assert eq <= ALPHA, (n, spread, kind, paired, eq)      # "equivalent" on a shift twice the margin
        if spread == 0.003 and n >= 5:
            assert dev >= 0.8, (n, spread, kind, paired, dev)


def test_power_to_show_equivalence_with_no_shift():
    rng = np.random.default_rng(105)
    for n, spread, kind, paired in grid():
        eq = rate(decide(draw(rng, n, 0.0, spread, paired, kind)) == stats.EQUIVALENT)
        print(f"no shift n={n:2d} spread={spread:.3f} {kind:9s} paired={paired!s:5s}: 'equivalent' {eq:.3f}")
        if spread == 0.003 and n >= 5:
            assert eq >= 0.8, (n, spread, kind, paired, eq)


@pytest.mark.parametrize("paired", [True, False])
def test_holm_keeps_the_family_wise_rate_over_12_comparisons(paired):
    """12 wrappers against one shared baseline: any false claim in the family counts."""
    rng = np.random.default_rng(106)
    k, m = 12, 4_000
    at_zero = draw(rng, 5, 0.0, 0.003, paired, "normal", m=m, arms=k)
    raw = rate(np.any(stats.p_difference(at_zero[0].test) < ALPHA, axis=-1))
    any_sig = rate(np.any(stats.holm(stats.p_difference(at_zero[0].test)) < ALPHA, axis=-1))
    dev_zero = rate(np.any(decide(at_zero) == stats.DEVIATION, axis=-1))
    on_margin = draw(rng, 5, UPPER, 0.003, paired, "normal", m=m, arms=k)
    outcomes = decide(on_margin)
    eq_margin = rate(np.any(outcomes == stats.EQUIVALENT, axis=-1))
    dev_margin = rate(np.any(outcomes == stats.DEVIATION, axis=-1))
    msg = (f"paired={paired}: FWER over {k} comparisons: significance unadjusted {raw:.3f}, Holm {any_sig:.3f}; "
           f"false 'deviation' at no shift {dev_zero:.3f}; on the margin: false 'equivalent' {eq_margin:.3f}, "
           f"false 'deviation' {dev_margin:.3f}")
    print(msg)
    for fwer in (any_sig, dev_zero, eq_margin, dev_margin):
        assert fwer <= ALPHA + 3 * mc_se(ALPHA, m), msg
    assert raw > 2 * ALPHA, msg + " (the family is too small to show the need for Holm)"


PARTIAL = {"2 of 10 shared": (np.r_[0, 1, 10:18], np.r_[0, 1, 20:28]),
           "5 of 6+5 shared": (np.arange(6), np.arange(5)), "3 of 6+6 shared": (np.r_[0:3, 10:13], np.r_[0:3, 20:23])}


def partly_shared(rng, layout, shift, spread, seed_sd, m=M):
    """Per-seed log values of two arms with the seeds of `layout`; a seed's effect is the same in both.
    Shaped (m, 1, seeds): one comparison per draw, as `decide` (Holm over the second axis) expects."""
    w_ids, b_ids = PARTIAL[layout]
    effect = rng.normal(0, seed_sd, (m, 1, 30))
    w = effect[..., w_ids] + shift + spread * rng.standard_normal((m, 1, w_ids.size))
    b = effect[..., b_ids] + spread * rng.standard_normal((m, 1, b_ids.size))
    return compare.designs(w_ids, w, b_ids, b)


@pytest.mark.parametrize("seed_sd", [0.0, 0.02], ids=["independent seeds", "seed effect 2%"])
def test_partly_shared_seeds_keep_their_level_and_use_every_run(seed_sd):
    """Item 2: both designs at half the level each (or pairing alone when >= 80 % of seeds are shared). On
    the margin nothing is shown beyond alpha; on a 2 % shift every run is used: the old rule (paired on the
    shared seeds only) is printed for contrast. The split costs power only where pairing alone was best
    (3 of 6+6 with a dominant seed effect)."""
    rng = np.random.default_rng(109)
    for layout in PARTIAL:
        on_margin = decide(partly_shared(rng, layout, UPPER, 0.005, seed_sd))
        eq, dev = rate(on_margin == stats.EQUIVALENT), rate(on_margin == stats.DEVIATION)
        tests = partly_shared(rng, layout, np.log(1.02), 0.005, seed_sd)
        power = rate(decide(tests) == stats.DEVIATION)
        old = rate(decide(tests[:1]) == stats.DEVIATION)       # the paired design alone, at the full level
        print(f"{layout}, seed sd {seed_sd}: on the margin 'equivalent' {eq:.3f}, 'deviation' {dev:.3f}; "
              f"+2% shift 'deviation' {power:.3f} (paired on shared seeds only: {old:.3f})")
        assert eq <= ALPHA + 3 * mc_se(ALPHA) and dev <= ALPHA / 2 + 3 * mc_se(ALPHA / 2), (layout, eq, dev)
        if layout == "2 of 10 shared" and seed_sd == 0:
            assert power >= 0.9 and power > old + 0.3, (power, old)
        if layout == "5 of 6+5 shared":         # >= 80 % shared: the paired test alone, nothing split
            assert power == old, (power, old)


RERUN_CASES = [  # (true shift, per-arm seed spread, first sweep's seeds, paired)
    (0.0, 0.003, 3, True), (0.0, 0.01, 3, True), (0.0, 0.01, 5, False), (np.log(1.005), 0.003, 5, True),
    (np.log(1.02), 0.01, 3, True), (np.log(1.02), 0.01, 5, False), (np.log(0.98), 0.006, 3, False),
]


def test_rerunning_to_the_advised_seeds_decides_at_the_first_holm_step():
    """Item 4: a first sweep is inconclusive in a family of 12; re-running with the advised seeds per arm
    must decide the true claim at Holm's first step (alpha/12) at least 80 % of the time."""
    rng = np.random.default_rng(107)
    level = ALPHA / 12
    worst = 1.0
    for shift, spread, n0, paired in RERUN_CASES:
        first = draw(rng, n0, shift, spread, paired, "normal")
        p_good, p_bad = compare.claim_p_values(first, LOWER, UPPER)
        undecided = ((p_good >= level) & (p_bad >= level)).ravel()
        test = first[0].test
        chosen = stats.LogRatioTest(*(np.asarray(getattr(test, f)).ravel()[undecided]
                                      for f in ("estimate", "se", "df", "unit_sd", "n")), test.paired)
        advice = planning.seeds_needed_array(chosen, LOWER, UPPER, level, n_now=n0)
        truth = stats.EQUIVALENT if LOWER < shift < UPPER else stats.DEVIATION
        decided = np.zeros(advice.shape, bool)
        for n in np.unique(advice[np.isfinite(advice)]).astype(int):
            idx = np.flatnonzero(advice == n)
            again = draw(rng, n, shift, spread, paired, "normal", m=idx.size)
            p_good, p_bad = compare.claim_p_values(again, LOWER, UPPER)
            outcome = stats.classify(p_bad, p_good, level).ravel()
            decided[idx] = outcome == truth
        success = rate(decided)
        worst = min(worst, success)
        print(f"re-run: shift {np.expm1(shift):+.3f}, spread {spread}, {n0} seeds, paired={paired}: "
              f"{undecided.sum()} of {M} inconclusive, advice median {np.nanmedian(advice):.0f} "
              f"(undecidable {rate(~np.isfinite(advice)):.3f}) -> decided '{truth}' at alpha/12: {success:.3f}")
    print(f"worst re-run success at Holm's first step of 12: {worst:.3f} (target >= 0.80, MC se {mc_se(0.8):.3f})")
    assert worst >= 0.80, worst


def arm(trainer, seeds, values):
    runs = [RunRecord(f"{trainer}-{i}", "FINISHED", {"evalkit.role": "job", "evalkit.seed": str(s)},
                      {"val/mse": float(v)}) for i, (s, v) in enumerate(zip(seeds, values))]
    return Arm(ArmKey("t", "c", trainer, "aligned"), runs)


LAYOUTS = {"paired": (range(5), range(5)), "unpaired": (range(10, 15), range(5)),
           "partly paired": ((0, 1, 2, 10, 11, 12), range(6))}


def test_every_printed_interval_agrees_with_its_decision():
    """Item 5, end to end through compare_metric + adjust: 100 families of 12 comparisons (random truths
    and seed layouts). Equivalent <=> interval inside the margin, deviation <=> entirely beyond it,
    inconclusive <=> it crosses a bound. The old 95 % interval is counted for contrast."""
    rng = np.random.default_rng(108)
    spec = compare.MetricSpec("val/mse", False, 0.01)
    shifts = np.log([1.0, 1.004, 0.995, 1.01, 0.99, 1.015, 0.98])
    counts, disagree, old_leaves = {}, 0, 0
    for family in range(100):
        base_effect = rng.normal(0, SEED_EFFECT, 20)
        comps = []
        for i in range(12):
            layout = list(LAYOUTS)[(family + i) % 3]
            w_seeds, b_seeds = LAYOUTS[layout]
            spread = [0.001, 0.003][i % 2]
            shift = shifts[rng.integers(shifts.size)]
            w = 0.05 * np.exp(base_effect[list(w_seeds)] + shift + spread * rng.standard_normal(len(w_seeds)))
            b = 0.05 * np.exp(base_effect[list(b_seeds)] + spread * rng.standard_normal(len(b_seeds)))
            comps.append(compare.compare_metric(arm(f"w{i}", w_seeds, w), arm("baseline", b_seeds, b), spec, ALPHA))
        compare.adjust(comps, ALPHA)
        for c in comps:
            counts[c.outcome] = counts.get(c.outcome, 0) + 1
            inside = LOWER < c.low and c.high < UPPER
            beyond = c.low > UPPER or c.high < LOWER
            agrees = {stats.EQUIVALENT: inside, stats.DEVIATION: beyond,
                      stats.INCONCLUSIVE: not inside and not beyond}[c.outcome]
            disagree += not agrees
            if c.outcome == stats.EQUIVALENT:
                d = next(d for d in c.designs if d.name == c.design)
                low, high = stats.interval(d.test, 1 - ALPHA)
                old_leaves += not (LOWER < low and high < UPPER)
    total = sum(counts.values())
    print(f"{total} comparisons: {counts}; printed interval disagrees with the decision: {disagree}; "
          f"'equivalent' whose 95 % interval leaves the margin (what used to be printed): "
          f"{old_leaves}/{counts.get(stats.EQUIVALENT, 0)}")
    assert disagree == 0
    assert all(counts.get(o, 0) > 50 for o in (stats.EQUIVALENT, stats.DEVIATION, stats.INCONCLUSIVE)), counts
