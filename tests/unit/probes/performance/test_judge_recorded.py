"""The performance probe's judge (issue 31) on the recorded evidence of the e2e tier's two probe runs
(probe_runs.PERFORMANCE_RUNS, recorded by scripts/record_probe_fixtures.py into tests/fixtures/performance/): a planted
copy of the baseline 30 % slower per step, and an identical copy, each at three depths, the six jobs taking turns.

On recorded evidence the judge is deterministic: exact outcomes (probe_runs.PERFORMANCE_OUTCOMES), the slower copy's
planted cost measured, the blocks paired by round. tests/e2e/test_probe_performance.py runs both live and asserts
the same outcomes."""
from __future__ import annotations

import pytest
from helpers import FIXTURES
from probe_runs import PERFORMANCE_OUTCOMES, PERFORMANCE_RUNS, judged_recording, probe_status, recording


def test_every_run_of_the_e2e_tier_has_a_recording_and_nothing_else_does():
    recorded = {p.name.removesuffix(".json.gz") for p in (FIXTURES / "performance").glob("*.json.gz")}
    assert recorded == set(PERFORMANCE_RUNS), "run: python scripts/record_probe_fixtures.py --probe performance"


@pytest.mark.parametrize("name", sorted(PERFORMANCE_RUNS))
def test_each_recording_took_turns_a_baseline_and_a_wrapper_job_per_depth(name):
    every, measured = recording("performance", name)
    assert measured is None
    jobs = [j for j in every if not j.name.endswith("-profile")]
    assert sorted(j.name for j in jobs) == sorted(f"d{d}-{arm}" for d in (2, 8, 32) for arm in ("baseline", "wrapper"))
    profiled = sorted(j.name for j in every if j.name.endswith("-profile"))
    assert profiled == ([] if name == "identical" else ["d32-baseline-profile", "d32-wrapper-profile"])
    for j in jobs:
        assert j.status == "FINISHED" and j.summary["ended_by"].startswith("turn table")
        assert len(j.summary["turns"]["blocks_s"]) >= 32 and j.summary["turns"]["steps_per_block"] >= 4
    rounds = {len(j.summary["turns"]["blocks_s"]) for j in jobs}
    assert len(rounds) == 1, rounds          # every job stopped after the same round


@pytest.mark.parametrize("name", sorted(PERFORMANCE_RUNS))
def test_each_recording_is_judged_as_planted(name):
    result = judged_recording("performance", name)
    assert probe_status(result) == PERFORMANCE_OUTCOMES[name], result["notes"]


def test_the_slower_copy_is_measured_at_its_planted_cost():
    figures = judged_recording("performance", "slow")["figures"]
    assert figures["added_fraction_low"] > 0.15 and figures["added_fraction"] < 0.45
    for depth in (2, 8, 32):
        assert 1.15 < figures[f"d{depth}/ratio"] < 1.45


def test_the_identical_copy_is_measured_near_nothing():
    figures = judged_recording("performance", "identical")["figures"]
    assert figures["added_fraction_high"] < 0.05
    for depth in (2, 8, 32):
        assert 0.9 < figures[f"d{depth}/ratio"] < 1.1


def test_the_start_up_is_reported():
    result = judged_recording("performance", "slow")
    assert result["figures"]["startup/first_step_s/baseline"] > result["figures"]["startup/torch_imported_s/baseline"]
    assert any("Start-up" in s for s in result["sections"])


def test_the_slower_copys_profile_names_the_planted_wait():
    section = judged_recording("performance", "slow")["sections"][-1]
    assert section.startswith("## Where the added time goes") and "`slow_loop:busy`" in section
