"""Per-step seed bands and the first step a wrapper leaves the baseline's band."""
import numpy as np

from evalkit.analysis.curves import CurveSet, divergence_band, first_divergence, seed_curves
from evalkit.analysis.records import RunRecord

STEPS = np.arange(1, 1001)


def curves(rng, seeds, shift=0.0, shift_from=10**9, seed_noise=0.05, run_noise=0.002):
    """Loss curves whose per-step noise is mostly the seed's (same data order in every arm)."""
    base = 0.1 + np.exp(-STEPS / 200)
    rows = []
    for seed in seeds:
        seed_rng = np.random.default_rng(seed)
        row = base * (1 + seed_noise * seed_rng.standard_normal(STEPS.size))
        row *= 1 + run_noise * rng.standard_normal(STEPS.size)
        rows.append(row * np.where(STEPS >= shift_from, 1 + shift, 1.0))
    return CurveSet(STEPS, np.array(rows), np.array(seeds))


def test_paired_arms_detect_a_planted_loss_shift_at_its_step():
    rng = np.random.default_rng(0)
    base = curves(rng, range(5))
    wrap = curves(rng, range(5), shift=0.02, shift_from=300)
    step = first_divergence(wrap, base)
    print(f"2% loss shift planted at step 300: first divergence at {step}")
    assert step is not None and 300 <= step <= 305, step


def test_no_shift_rarely_leaves_the_band():
    rng = np.random.default_rng(1)
    base = curves(rng, range(5))
    alarms = [first_divergence(curves(rng, range(5)), base) for _ in range(100)]
    rate = np.mean([a is not None for a in alarms])
    print(f"false divergence rate over 100 null wrappers, 1,000 steps each: {rate:.2f}")
    assert rate <= 0.1, (rate, [a for a in alarms if a is not None])


def test_unpaired_band_is_wider_and_only_catches_large_shifts():
    rng = np.random.default_rng(2)
    base = curves(rng, range(5))
    small = curves(rng, range(100, 105), shift=0.02, shift_from=300)
    large = curves(rng, range(100, 105), shift=0.5, shift_from=300)
    band = divergence_band(small, base)
    assert not band.paired
    assert first_divergence(small, base) is None
    step = first_divergence(large, base)
    assert step is not None and 300 <= step <= 310, step


def test_bit_identical_and_nearly_identical_curves_never_diverge():
    rng = np.random.default_rng(3)
    base = curves(rng, range(3), run_noise=0.0)
    assert first_divergence(base, base) is None
    jitter = CurveSet(base.steps, base.values * (1 + 1e-7 * rng.standard_normal(base.values.shape)), base.seeds)
    assert first_divergence(jitter, base) is None
    assert first_divergence(CurveSet(base.steps, base.values * 1.01, base.seeds), base) == 1


def test_single_seed_arms_use_the_relative_floor_only():
    rng = np.random.default_rng(4)
    base = curves(rng, [0], run_noise=0.0)
    assert first_divergence(base, base, rtol=1e-3) is None
    wrap = CurveSet(base.steps, base.values * np.where(STEPS >= 700, 1.01, 1.0), base.seeds)
    assert first_divergence(wrap, base, rtol=1e-3) == 700


def record(seed, repeat, steps, loss):
    tags = {"evalkit.role": "job", "evalkit.seed": str(seed), "evalkit.repeat": str(repeat)}
    return RunRecord(f"r{seed}{repeat}", "FINISHED", tags, {},
                     steps={"step": np.asarray(steps, float), "loss": np.asarray(loss, float)})


def test_seed_curves_average_repeats_and_align_short_runs_with_nan():
    runs = [record(0, 0, [1, 2, 3], [1.0, 2.0, 3.0]), record(0, 1, [1, 2, 3], [3.0, 4.0, 5.0]),
            record(1, 0, [1, 2], [7.0, 8.0]), RunRecord("x", "FINISHED", {}, {})]  # no records: skipped
    cs = seed_curves(runs, "loss")
    assert cs.steps.tolist() == [1, 2, 3] and cs.seeds.tolist() == [0, 1]
    np.testing.assert_allclose(cs.values, [[2.0, 3.0, 4.0], [7.0, 8.0, np.nan]])
    np.testing.assert_allclose(cs.mean(), [4.5, 5.5, 4.0])
    assert seed_curves(runs, "lr").n_seeds == 0
