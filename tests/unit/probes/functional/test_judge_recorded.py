"""The functional probe's judge on the recorded evidence of the e2e tier's probe run (helpers.FUNCTIONAL_RUNS: the
baseline's loop under a name of its own, recorded by scripts/record_probe_fixtures.py into tests/fixtures/functional/).

The loop passes every item, its resume continuing bit for bit from a copy of its own step-8 checkpoint, and the
verdict's functional column shows the probe's pass. tests/e2e/test_probe_functional.py runs it live and checks that
its result still equals the recording's; planted failures of each item are tests/unit/probes/functional/test_judge.py.
"""
from __future__ import annotations

from helpers import FIXTURES, FUNCTIONAL_RUNS, judged_recording, recording, verdict_cell

JOBS = ["plain", "baseline", "bf16_mixed", "fp16_mixed", "ws2", "pg", "resume"]


def test_every_run_of_the_e2e_tier_has_a_recording_and_nothing_else_does():
    recorded = {p.name.removesuffix(".json.gz") for p in (FIXTURES / "functional").glob("*.json.gz")}
    assert recorded == set(FUNCTIONAL_RUNS), "run: python scripts/record_probe_fixtures.py --probe functional"


def test_the_recording_holds_every_job_run_to_its_end():
    jobs, measured = recording("functional", "handwritten")
    assert measured is None and sorted(j.name for j in jobs) == sorted(JOBS)
    assert all(j.status == "FINISHED" and j.steps for j in jobs)


def test_the_baseline_passes_every_item():
    result = judged_recording("functional", "handwritten")
    assert result["passed"] and not result["inconclusive"] and result["findings"] == []
    assert result["figures"]["items_passed"] == result["figures"]["items_total"] == 10
    assert result["figures"]["checkpoint_ratio"] == 1.0 and result["figures"]["checkpoint_bytes"] > 0
    assert result["headline"] == "10/10 items; checkpoint 1.00x the baseline's"
    table = result["sections"][0]
    assert table.count("| pass |") == 10
    assert "its losses equal the uninterrupted run's, bit for bit" in table


def test_the_verdicts_functional_column_shows_the_probes_pass():
    result = judged_recording("functional", "handwritten")
    functional = verdict_cell("functional", result, "handwritten")
    assert functional.status == "pass" and functional.figure == result["headline"]
