"""The performance probe's judge (issue 12) on the recorded timings of the e2e tier's two probe runs
(helpers.PERFORMANCE_RUNS, recorded by scripts/record_probe_fixtures.py into tests/fixtures/performance/): a planted
copy of the baseline three times as slow (tests/planted/slow_loop.py), three pairs, and an identical copy, six pairs.

On recorded timings the judge is deterministic: whichever way the recording's noise went, the slower copy is reported
slower (its ratio's lower bound above 1.3, its planted cost measured; failed when its timing was stable, said and not
judged when not) and the identical copy is not failed. tests/e2e/test_probe_performance.py times both live and
checks that each decision is of its recording's class (helpers.performance_class)."""
from __future__ import annotations

import statistics

import pytest
from helpers import FIXTURES, PERFORMANCE_RUNS, PERFORMANCE_WIDTH, judged_recording, performance_class, recording

WIDTH = PERFORMANCE_WIDTH


def planted_ms(jobs) -> float:
    """The median wait the slower copy's jobs planted per step (their effective config)."""
    return statistics.median(j.effective["planted_added_ms"] for j in jobs if j.name.endswith("-wrapper"))


def test_every_run_of_the_e2e_tier_has_a_recording_and_nothing_else_does():
    recorded = {p.name.removesuffix(".json.gz") for p in (FIXTURES / "performance").glob("*.json.gz")}
    assert recorded == set(PERFORMANCE_RUNS), "run: python scripts/record_probe_fixtures.py --probe performance"


@pytest.mark.parametrize(("name", "pairs"), [("slow", 3), ("identical", 6)])
def test_each_recording_alternates_its_pairs_each_job_timed(name, pairs):
    jobs, measured = recording("performance", name)
    assert measured is None and len(jobs) == 2 * pairs
    arms = [j.name.rsplit("-", 1)[1] for j in jobs]
    assert arms == (["baseline", "wrapper", "wrapper", "baseline"] * pairs)[:2 * pairs]
    assert all(j.status == "FINISHED" and j.summary["step_time_median_s"] > 0 for j in jobs)


def test_the_slower_copy_is_reported_slower_with_its_planted_cost():
    jobs, _ = recording("performance", "slow")
    result = judged_recording("performance", "slow")
    figures = result["figures"]
    assert figures[f"h{WIDTH}/ratio_low"] > 1.3, figures
    assert figures[f"h{WIDTH}/added_ms"] == pytest.approx(planted_ms(jobs), rel=0.35)
    if figures[f"h{WIDTH}/stable"]:       # judged: three times as slow is far outside the budget
        assert not result["passed"] and not result["inconclusive"]
        assert "above the budget" in result["notes"][0]
        assert "ms/step" in result["headline"]
    else:                                 # three pairs on a noisy machine: said, not judged
        assert result["inconclusive"]
        assert "spread" in result["notes"][1] or "drifted" in result["notes"][1]
    assert performance_class(result) == "slower"


def test_the_identical_copy_is_not_failed():
    result = judged_recording("performance", "identical")
    assert result["passed"] or result["inconclusive"], result["notes"]
    assert result["figures"][f"h{WIDTH}/ratio_low"] < 1.3
    assert performance_class(result) == "not slower"


def test_the_start_up_is_reported():
    result = judged_recording("performance", "slow")
    assert result["figures"]["startup/first_step_s/baseline"] > result["figures"]["startup/torch_imported_s/baseline"]
    assert any("Start-up" in s for s in result["sections"])
