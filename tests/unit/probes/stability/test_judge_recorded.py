"""The stability probe's judge (issue 13) on the recorded evidence of the e2e tier's three probe runs
(helpers.STABILITY_RUNS, recorded by scripts/record_probe_fixtures.py into tests/fixtures/stability/).

The baseline passes every item (its resumes bit for bit, the damaged checkpoints refused, the errors shown, no leak
in a 300-step run). Two planted variants of it (tests/planted/unstable_loop.py) plant one fault per item, each a
different one, and each is caught and named: RNG, optimizer and scheduler state not restored, a step repeated,
the data position lost, an in-place checkpoint write truncated by the kill and loaded, a damaged checkpoint
replaced by a fresh start, an out-of-memory error swallowed with exit 0, and a leak of 300 KiB per step; the
verdict's column names the failed items. tests/e2e/test_probe_stability.py runs the three live and checks that their
results still equal the recordings'."""
from __future__ import annotations

import pytest
from helpers import FIXTURES, STABILITY_RUNS, judged_recording, recording, verdict_cell


def finding(result: dict, item: str) -> dict:
    return next(f for f in result["findings"] if f["code"] == f"stability.{item}")


def test_every_run_of_the_e2e_tier_has_a_recording_and_nothing_else_does():
    recorded = {p.name.removesuffix(".json.gz") for p in (FIXTURES / "stability").glob("*.json.gz")}
    assert recorded == set(STABILITY_RUNS), "run: python scripts/record_probe_fixtures.py --probe stability"


@pytest.mark.parametrize("name", sorted(STABILITY_RUNS))
def test_each_recording_is_real_evidence(name):
    jobs, measured = recording("stability", name)
    assert measured is None and jobs
    assert any(j.status == "FINISHED" and j.steps for j in jobs)
    assert any(j.status != "FINISHED" for j in jobs)                 # the killed ones


def test_the_baseline_passes_every_item_its_resumes_bit_for_bit():
    result = judged_recording("stability", "baseline")
    assert result["passed"] and not result["inconclusive"] and result["findings"] == []
    figures = result["figures"]
    assert figures["items_total"] == 10 and figures["items_passed"] == 10     # long run included
    assert figures["resumes_bit_for_bit"] == 4 and figures["unsafe_loads"] == 0
    assert result["headline"] == "10/10 items"
    table = result["sections"][0]
    assert table.count("| pass |") == 10 and "bit for bit (resumed after step 18)" in table
    assert "refused it: CorruptCheckpoint" in table          # flipped bytes caught by the checksum


def test_each_lost_state_on_resume_is_caught_and_named():
    a, b = judged_recording("stability", "planted_a"), judged_recording("stability", "planted_b")
    assert not a["passed"] and not b["passed"]
    rng = finding(a, "kill_between")
    assert rng["first_step"] == 7 and "RNG state lost" in rng["size"]
    optimizer = finding(a, "kill_after_checkpoint")
    assert optimizer["first_step"] == 19 and "optimizer state lost" in optimizer["size"]
    assert "param groups" in optimizer["size"]        # the LR the optimizer held was lost with it
    data = finding(a, "kill_during_write")
    assert data["first_step"] == 7 and "data position lost: step 7 trained on the samples of step 1" in data["size"]
    scheduler = finding(b, "kill_between")
    assert scheduler["first_step"] == 8 and "scheduler state lost" in scheduler["size"]   # step 7: the LR it held
    repeated = finding(b, "kill_after_checkpoint")
    assert "step 19 trained on the samples of step 18 (repeated)" in repeated["size"]
    assert "7 optimizer steps after resuming where 6 were left" in repeated["size"]


def test_a_truncated_in_place_checkpoint_a_fresh_start_a_swallowed_oom_and_a_leak_are_caught():
    a, b = judged_recording("stability", "planted_a"), judged_recording("stability", "planted_b")
    in_place = finding(b, "kill_during_write")
    assert "the resume failed" in in_place["size"] and "step_00000012.pt" in in_place["size"]
    fresh = finding(a, "corrupt_truncated")
    assert fresh["size"].startswith("started again from step 1 without a word")
    oom = finding(a, "out_of_memory")
    assert oom["size"].startswith("exited 0 after the out-of-memory error at step 5 (swallowed")
    leak = finding(a, "long_run")
    assert leak["size"].startswith("memory leak: rss grows")
    assert a["figures"]["leak_low"] > 200 * 1000                   # 300 KiB a step: about 300,000 KiB per 1,000
    assert judged_recording("stability", "baseline")["figures"]["leak_high"] < a["figures"]["leak_low"]


def test_the_verdicts_stability_column_shows_the_failed_items():
    result = judged_recording("stability", "planted_b")
    cell = verdict_cell("stability", result, "unstable")
    assert cell.status == "fail" and cell.figure == result["headline"]
    assert cell.figure.startswith("0/3 items: kill between, kill after checkpoint, kill during write")
