"""The performance probe's statistics (blocks.py) on synthetic blocks with a known truth: false-positive rate and
power of its decision, coverage of its interval under a drifting machine, the fit's recovery of a fixed and a
proportional cost, the looks and their level. No process runs.

The synthetic machine is the one measured here (issue 31's note): a block's time moves with the machine's state (a
slow random walk, shared by the two blocks of a round) and by about 7 % on its own (a round's log ratio then spreads
by 10 %, as measured); the wrapper adds
`fixed` ms per step plus `proportional` x the step."""
from __future__ import annotations

import math

import numpy as np
import pytest

from evalkit.probes.performance.blocks import (
    Size,
    batch_means,
    decide,
    decision_level,
    estimate,
    interval,
    looks,
    rounds_needed,
)

STEP_MS = {2: 1.3, 8: 3.4, 32: 11.0}          # the baseline's step at each depth, as measured here
STEPS = {2: 15, 8: 6, 32: 4}
LEVEL = decision_level(512)


def blocks(rounds: int, proportional: float = 0.0, fixed_ms: float = 0.0, noise: float = 0.07, drift: float = 0.03,
           seed: int = 0, ar: float = 0.0) -> list[Size]:
    """Per depth the baseline's and the wrapper's block seconds over `rounds` rounds; `ar`: the blocks' own noise is
    AR(1) with this coefficient (rounds that are not independent)."""
    rng = np.random.default_rng(seed)
    machine = np.exp(np.cumsum(drift * rng.standard_normal(rounds)))     # both arms' blocks of a round alike
    out = []
    for depth, step in STEP_MS.items():
        k = STEPS[depth]
        own = []
        for _ in range(2):
            e = np.empty(rounds)
            e[0] = rng.standard_normal()
            for i in range(1, rounds):
                e[i] = ar * e[i - 1] + math.sqrt(1 - ar * ar) * rng.standard_normal()
            own.append(np.exp(noise * e))
        base = k * step / 1000 * machine * own[0]
        wrap = k * (step * (1 + proportional) + fixed_ms) / 1000 * machine * own[1]
        out.append(Size(depth, k, base, wrap))
    return out


def calls(truth: dict, runs: int = 200, rounds: int = 128, budget: float = 0.05) -> dict[str, int]:
    counts = {"within": 0, "outside": 0, "undecided": 0}
    for seed in range(runs):
        counts[decide(estimate(blocks(rounds, seed=seed, **truth), LEVEL).fraction, budget)] += 1
    return counts


def test_an_identical_copy_is_never_called_outside_and_nine_times_in_ten_within_at_128_rounds():
    counts = calls({})
    assert counts["outside"] == 0 and counts["within"] >= 180, counts      # 189 of 200 here


def test_a_copy_ten_percent_slower_per_step_is_never_called_within_and_mostly_outside_at_128_rounds():
    """173 of 200 (183 before blocks.PROCESS_SD: what a spread between processes costs in one run's power; the
    defaults go on to 256 and 512 rounds when 128 do not decide)."""
    counts = calls({"proportional": 0.10})
    assert counts["within"] == 0 and counts["outside"] >= 165, counts      # 173 of 200 here


def test_a_fixed_cost_per_step_is_judged_on_a_real_models_step_not_on_the_toy_ratio():
    """0.8 ms per step is 60 % of the smallest model's step but under 1 % of a 100 ms one: within."""
    est = estimate(blocks(256, fixed_ms=0.8, noise=0.05), LEVEL)
    assert est.ratio[2].estimate > 1.4
    assert est.fixed_ms == pytest.approx(0.8, abs=0.3) and est.proportional == pytest.approx(0.0, abs=0.02)
    assert decide(est.fraction, 0.05) == "within"


def test_the_fit_recovers_a_fixed_and_a_proportional_cost():
    est = estimate(blocks(512, fixed_ms=0.3, proportional=0.07, noise=0.03), LEVEL)
    assert est.fixed_ms == pytest.approx(0.3, abs=0.1) and est.proportional == pytest.approx(0.07, abs=0.01)
    assert est.fraction.low < 0.07 + 0.003 < est.fraction.high
    for depth, step in STEP_MS.items():
        assert est.added[depth].estimate == pytest.approx(0.3 + 0.07 * step, rel=0.2)


def test_batch_means_keep_their_coverage_where_rounds_are_not_independent():
    """Autocorrelated blocks (AR 0.6: four times the lag-1 correlation measured here): the batch-means interval
    covers the truth at about its level, where one that took the rounds for independent ones covers it far less
    often. (At AR 0.9 batches of 16 rounds are still correlated: 85 % coverage.)"""
    truth, covered, naive = 0.05, 0, 0
    for seed in range(200):
        sizes = blocks(256, proportional=truth, ar=0.6, seed=seed)
        est = estimate(sizes, 0.95)
        covered += est.fraction.low <= truth <= est.fraction.high
        per_round = np.exp(sizes[-1].log_ratio()) - 1
        iv = interval(per_round, 0.95)      # every round an observation of its own
        naive += iv.low <= truth <= iv.high
    assert covered >= 0.88 * 200 and naive < 0.75 * 200, (covered, naive)


def test_one_size_only_takes_the_ratio_as_the_fraction():
    est = estimate(blocks(128, fixed_ms=0.26)[:1], LEVEL)     # 0.26 ms on a 1.3 ms step: a fifth
    assert est.fixed_ms is None and est.fraction.estimate == pytest.approx(0.2, abs=0.03)


def test_the_looks_and_their_level():
    assert looks(512) == [32, 64, 128, 256, 512] and looks(100) == [32, 64, 100] and looks(32) == [32]
    assert decision_level(512) == pytest.approx(1 - 0.05 / 6)


def test_rounds_needed_grows_as_the_estimate_nears_the_budget():
    est = estimate(blocks(64, proportional=0.04), LEVEL)
    needed = rounds_needed(est.fraction, 0.05, 64)
    assert needed is None or needed > 64
    far = estimate(blocks(64, proportional=-0.05), LEVEL)
    near = estimate(blocks(64, proportional=0.02), LEVEL)
    assert rounds_needed(far.fraction, 0.05, 64) < rounds_needed(near.fraction, 0.05, 64)


def test_no_number_of_rounds_decides_an_estimate_nearer_the_budget_than_processes_differ():
    est = estimate(blocks(64, proportional=0.05), LEVEL)
    assert abs(est.fraction.estimate - 0.05) < est.fraction.floor
    assert rounds_needed(est.fraction, 0.05, 64) is None
    assert est.fraction.half > est.fraction.floor > 0


def test_batch_means_split_into_contiguous_batches():
    assert list(batch_means(np.arange(32.0), 16)) == [i * 2 + 0.5 for i in range(16)]
    assert len(batch_means(np.arange(5.0), 16)) == 5
