"""Issue 11, items 2 and 3: which runs are paired, and that no run is thrown away doing it."""
import numpy as np
import pytest

from evalkit.analysis import compare
from evalkit.analysis.arms import Arm, ArmKey
from evalkit.analysis.curves import divergence_band, seed_curves
from evalkit.analysis.records import RunRecord

SPEC = compare.MetricSpec("val/mse", higher_is_better=False, margin=0.01)


def arm(trainer, values, seeds=None):
    """An arm of finished runs with these final values; `seeds=None` leaves the seed tag off."""
    runs = []
    for i, value in enumerate(values):
        tags = {"evalkit.role": "job", "evalkit.trainer": trainer}
        if seeds is not None:
            tags["evalkit.seed"] = str(seeds[i])
        steps = np.arange(1, 11, dtype=float)
        runs.append(RunRecord(f"{trainer}{i}", "FINISHED", tags, {"val/mse": float(value)},
                              steps={"step": steps, "loss": value * (1 + 1 / steps)}))
    return Arm(ArmKey("t", "c", trainer, "aligned"), runs)


def decided(w, b, spec=SPEC):
    c = compare.compare_metric(w, b, spec, 0.05)
    compare.adjust([c], 0.05)
    return c


def test_ten_runs_per_arm_sharing_two_seeds_use_every_run():
    """Item 2: 2 shared seeds of 10 must not reduce the comparison to n = 2."""
    rng = np.random.default_rng(11)
    base = np.exp(rng.normal(0, 0.01, 10)) * 0.05
    wrap = np.exp(rng.normal(np.log(1.03), 0.01, 10)) * 0.05
    shared = decided(arm("w", wrap, [0, 1, *range(10, 18)]), arm("baseline", base, [0, 1, *range(20, 28)]))
    disjoint = decided(arm("w", wrap, range(10, 20)), arm("baseline", base, range(20, 30)))
    print(f"2 shared seeds: {shared.outcome} {shared.design_text()}; none shared: {disjoint.outcome} "
          f"{disjoint.design_text()}")
    assert disjoint.outcome == compare.DEVIATION and disjoint.design == "unpaired" and disjoint.n == 10
    assert shared.outcome == compare.DEVIATION, shared.design_text()
    assert shared.design == "unpaired" and shared.n == 10 and shared.candidates == 2 and shared.shared == 2
    assert shared.design_text() == ("unpaired, 10+10 seeds (best of this and paired on the 2 shared seeds, "
                                    "Bonferroni x2)")


def test_mostly_shared_seeds_pair_alone():
    """5 shared seeds whose seed effect dominates, plus one extra wrapper seed (>= 80 % shared): paired,
    without a Bonferroni split, and the text says the unshared seed was left out."""
    rng = np.random.default_rng(12)
    seed_effect = rng.normal(0, 0.02, 6)
    base = 0.05 * np.exp(seed_effect[:5] + rng.normal(0, 0.0005, 5))
    wrap = 0.05 * np.exp(seed_effect + rng.normal(0, 0.0005, 6))
    c = decided(arm("w", wrap, range(6)), arm("baseline", base, range(5)))
    assert c.outcome == compare.EQUIVALENT and c.design == "paired" and c.n == 5 and c.candidates == 1, \
        c.design_text()
    assert c.design_text() == "paired, 5 seeds (1 unshared seed left out)"


def test_half_shared_seeds_run_both_designs():
    rng = np.random.default_rng(14)
    seed_effect = rng.normal(0, 0.02, 30)
    w_seeds, b_seeds = [0, 1, 2, 10, 11, 12], [0, 1, 2, 20, 21, 22]
    base = 0.05 * np.exp(seed_effect[b_seeds] + rng.normal(0, 0.0005, 6))
    wrap = 0.05 * np.exp(seed_effect[w_seeds] + rng.normal(0, 0.0005, 6))
    c = decided(arm("w", wrap, w_seeds), arm("baseline", base, b_seeds))
    assert c.candidates == 2 and c.design == "paired" and c.outcome == compare.EQUIVALENT, c.design_text()
    assert c.design_text() == ("paired, 3 seeds (6 unshared seeds left out) (best of this and unpaired on all "
                               "6+6 seeds, Bonferroni x2)")


def test_fully_shared_and_disjoint_seeds_are_one_design_without_correction():
    rng = np.random.default_rng(13)
    values = 0.05 * np.exp(rng.normal(0, 0.003, 5))
    same = decided(arm("w", values * 1.001, range(5)), arm("baseline", values, range(5)))
    assert same.design == "paired" and same.candidates == 1 and same.design_text() == "paired, 5 seeds"
    apart = decided(arm("w", values, range(5)), arm("baseline", values, range(5, 10)))
    assert apart.design == "unpaired" and apart.candidates == 1 and apart.design_text() == "unpaired, 5+5 seeds"


def test_runs_without_a_seed_tag_are_never_paired_and_none_is_dropped():
    """Item 3: untagged runs used to get colliding placeholder ids and were paired by position."""
    w = arm("w", [0.050, 0.051, 0.049])
    b = arm("baseline", [0.050, 0.052, 0.048, 0.0505, 0.0495])
    c = decided(w, b)
    assert c.design == "unpaired" and c.shared == 0, c.design_text()
    assert c.design_text() == "unpaired, 3+5 seeds"
    assert c.noise_wrapper.n_runs == 3 and c.noise_baseline.n_runs == 5


def test_untagged_runs_are_never_paired_in_the_curve_band_either():
    w, b = arm("w", [0.05, 0.051, 0.049]), arm("baseline", [0.05, 0.052, 0.048])
    band = divergence_band(seed_curves(w.finished, "loss"), seed_curves(b.finished, "loss"))
    assert not band.paired


@pytest.mark.parametrize("w_seeds, b_seeds, expect", [([0, 1, 2], [0, 1, 2], 3), ([0, 1, 2], [0, 1, 5], 2)])
def test_tagged_seeds_still_pair(w_seeds, b_seeds, expect):
    values = [0.050, 0.051, 0.049]
    c = decided(arm("w", values, w_seeds), arm("baseline", values, b_seeds))
    assert c.shared == expect
