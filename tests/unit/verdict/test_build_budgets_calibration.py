"""Calibration of the verdict's sweep fallback for the performance column (issue 44): the throughput budget 0.9
(wrapper/baseline samples per second >= 0.9) and the memory budget 1.1 (peak memory <= 1.1), as `build_verdict`
applies them where no performance probe ran (`compare_budget`: Welch on the runs' log values, Holm over the arm's
comparisons, then `judge_performance`: fail when a ratio is shown outside, pass when both are shown within).

Synthetic sweeps with a known truth, one wrapper arm against the baseline, at the evalkit-eval presets' seed counts
(quick 3 runs per arm, thorough 8): a run's throughput spreads `sd` (2 % as analysis.synthetic plants it, 5 % and
10 % for a loaded machine), its peak memory a quarter of that. The decision is the analyzer's own functions,
vectorised over M draws; the first test shows it equals `build_verdict`'s cell draw for draw.

Measured (M = 4000, rng seed 45), the performance cell:
  identical arms:        fail 0.0 % (0.05 % at 3 runs, 10 %); pass 100 % (3 runs, 2 %), 61 % (3, 5 %), 22 % (3, 10 %);
                         100 % (8 runs, 2 %), 99 % (8, 5 %), 64 % (8, 10 %)
  throughput ratio 0.9 (on the line): outside 0.9 % (3 runs), 1.6 % (8) (<= alpha/2), within 3.7-4.9 % (<= alpha)
  throughput ratio 0.8 (20 % slower): fail 97 % (3 runs, 2 %), 37 % (3, 5 %), 9 % (3, 10 %); 100 %, 98 %, 50 % (8 runs);
                         pass at most 0.15 %
  memory ratio 1.1 (on the line): outside 1.1 % (3), 1.7 % (8), within 2.1-5.2 %;
  memory ratio 1.2: fail 100 %, 99 %, 67 % (3 runs at sd 0.5, 1.25, 2.5 %), 100 % at 8 runs, never a pass
A sweep of 3 runs on a noisy machine (>= 5 % run-to-run) has little power against a 20 % slowdown: the cell then says
inconclusive with the seeds that would decide (never pass); the performance probe measures it for this question.
"""
from __future__ import annotations

import numpy as np
import pytest

from evalkit import names
from evalkit.analysis import compare, stats
from evalkit.analysis.design import UNPAIRED, Design
from evalkit.analysis.synthetic import ArmPlan, records
from evalkit.presets import QUICK, THOROUGH
from evalkit.verdict.build import VerdictOptions, build_verdict
from evalkit.verdict.dimensions import FAIL, INCONCLUSIVE, PASS

OPTIONS = VerdictOptions()
ALPHA = OPTIONS.alpha
THROUGHPUT = compare.Budget(names.PERF_SAMPLES_PER_S, "throughput", OPTIONS.throughput_min, True)
MEMORY = compare.Budget(names.PERF_PEAK_MEM, "peak memory", OPTIONS.memory_max, False)
M = 4000


def test_the_budgets_and_seed_counts_are_the_verdicts_defaults():
    assert (OPTIONS.throughput_min, OPTIONS.memory_max) == (0.9, 1.1)
    assert (QUICK.seeds, THOROUGH.seeds) == (3, 8)


def draw(rng, n: int, m: int, throughput: float, memory: float, sd: float):
    """Log values (wrapper, baseline) of throughput and of memory, shape (m, n) each."""
    def pair(ratio, spread):
        return np.log(ratio) + spread * rng.standard_normal((m, n)), spread * rng.standard_normal((m, n))
    return pair(throughput, sd), pair(memory, sd / 4)


def cells(values) -> tuple[np.ndarray, np.ndarray]:
    """(the performance cell, each budget's outcome) as the verdict decides them: Holm over the arm's three
    comparisons (the final metric's, equivalent here, and the two budgets)."""
    (tw, tb), (mw, mb) = values
    m = tw.shape[0]
    p = [compare.claim_p_values([Design(UNPAIRED, stats.welch_test(w, b), w.shape[-1], b.shape[-1])], *budget.bounds)
         for (w, b), budget in (((tw, tb), THROUGHPUT), ((mw, mb), MEMORY))]
    p_good = np.stack([np.zeros(m), p[0][0], p[1][0]], -1)
    p_bad = np.stack([np.ones(m), p[0][1], p[1][1]], -1)
    out = stats.classify(stats.holm(p_bad), stats.holm(p_good), ALPHA)[:, 1:]
    cell = np.where(np.any(out == stats.DEVIATION, -1), FAIL,
                    np.where(np.all(out == stats.EQUIVALENT, -1), PASS, INCONCLUSIVE))
    return cell, out


def rates(cell: np.ndarray) -> dict[str, float]:
    return {c: float(np.mean(cell == c)) for c in (PASS, FAIL, INCONCLUSIVE)}


def mc_se(p: float) -> float:
    return float(np.sqrt(p * (1 - p) / M))


def test_the_vectorised_decision_is_build_verdicts_cell():
    rng = np.random.default_rng(8)
    for i in range(12):
        truth = [(1.0, 1.0), (0.8, 1.0), (1.0, 1.2), (0.9, 1.1)][i % 4]
        values = draw(rng, 3, 1, *truth, sd=0.05)
        runs = records([ArmPlan("baseline", seeds=(0, 1, 2)), ArmPlan("wrapper", seeds=(0, 1, 2))], n_steps=10)
        for r in runs:
            arm = int(r.trainer != "baseline")
            seed = int(r.seed)
            (tw, tb), (mw, mb) = values
            r.metrics[names.PERF_SAMPLES_PER_S] = 1000 * float(np.exp((tw if arm else tb)[0, seed]))
            r.metrics[names.PERF_PEAK_MEM] = 2e8 * float(np.exp((mw if arm else mb)[0, seed]))
        row = build_verdict(runs).rows[0]
        expected = cells(values)[0][0]
        assert row.dimensions["performance"].status == expected, (i, truth, row.dimensions["performance"])


@pytest.mark.parametrize("n", [3, 8])
@pytest.mark.parametrize("sd", [0.02, 0.05, 0.10])
def test_identical_arms_never_fail(n, sd):
    r = rates(cells(draw(np.random.default_rng(45), n, M, 1.0, 1.0, sd))[0])
    assert r[FAIL] <= 0.001, r                       # measured 0.0 % (0.05 % at 3 runs, 10 %)


@pytest.mark.parametrize("n, sd, at_least", [(3, 0.02, 0.99), (3, 0.05, 0.55), (8, 0.05, 0.97), (8, 0.10, 0.58)])
def test_identical_arms_pass_when_the_noise_allows(n, sd, at_least):
    """Measured 100 %, 61 %, 99 %, 64 %."""
    assert rates(cells(draw(np.random.default_rng(45), n, M, 1.0, 1.0, sd))[0])[PASS] >= at_least


@pytest.mark.parametrize("n", [3, 8])
@pytest.mark.parametrize("sd", [0.02, 0.05, 0.10])
@pytest.mark.parametrize("which", ["throughput", "memory"])
def test_a_ratio_on_the_line_is_outside_at_most_half_alpha_and_within_at_most_alpha(n, sd, which):
    truth = (0.9, 1.0) if which == "throughput" else (1.0, 1.1)
    out = cells(draw(np.random.default_rng(45), n, M, *truth, sd))[1][:, 0 if which == "throughput" else 1]
    outside, within = float(np.mean(out == stats.DEVIATION)), float(np.mean(out == stats.EQUIVALENT))
    assert outside <= ALPHA / 2 + 3 * mc_se(ALPHA / 2), (outside, within)      # measured 0.9-1.7 %
    assert within <= ALPHA + 3 * mc_se(ALPHA), (outside, within)               # measured 2.1-5.2 %


@pytest.mark.parametrize("n, sd, power", [(3, 0.02, (0.94, 1.0)), (3, 0.05, (0.31, 0.41)), (3, 0.10, (0.07, 0.13)),
                                          (8, 0.02, (0.99, 1.0)), (8, 0.05, (0.97, 1.0)), (8, 0.10, (0.44, 0.54))])
def test_a_wrapper_twenty_percent_slower_fails_with_the_power_measured(n, sd, power):
    """Throughput ratio 0.8: fail 97 %, 37 %, 9 % at 3 runs; 100 %, 98 %, 50 % at 8; a pass at most 0.15 %."""
    r = rates(cells(draw(np.random.default_rng(45), n, M, 0.8, 1.0, sd))[0])
    assert power[0] <= r[FAIL] <= power[1] and r[PASS] <= 0.002, r


@pytest.mark.parametrize("n, sd, at_least", [(3, 0.02, 0.99), (3, 0.05, 0.98), (3, 0.10, 0.62), (8, 0.10, 0.99)])
def test_a_wrapper_using_twenty_percent_more_memory_fails(n, sd, at_least):
    """Memory ratio 1.2 (memory spread sd/4): fail 100 %, 99 %, 67 %, 100 %. Never a pass."""
    r = rates(cells(draw(np.random.default_rng(45), n, M, 1.0, 1.2, sd))[0])
    assert r[FAIL] >= at_least and r[PASS] == 0, r
