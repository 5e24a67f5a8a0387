"""The stability probe's judge (issues 13, 28) on the recorded evidence of the e2e tier's four probe runs
(probe_runs.STABILITY_RUNS, recorded by scripts/record_probe_fixtures.py into tests/fixtures/stability/).

The baseline passes every item (its resumes bit for bit, the damaged checkpoints refused while an intact copy
resumes, the errors shown, its long run's slopes within its own long run's beside it). Two planted variants of it
(tests/planted/unstable_loop.py) plant one fault per item, each a different one, and each is caught and named: RNG,
optimizer and scheduler state not restored, a step repeated, the data position lost, an in-place checkpoint write
truncated by the kill and loaded, a damaged checkpoint replaced by a fresh start, a checkpoint with flipped bytes
loaded (shared with plain torch), an out-of-memory error swallowed with exit 0, and a leak of 300 KiB per step; the
verdict's column names the failed items. A third (tests/planted/quiet_loop.py, issue 28) plants what the judge once
let pass: a non-reproducible wrapper that also loses its data position on resume (fails, naming the data position),
a crash for an unrelated reason on every resume of a checkpoint copy (the damaged-checkpoint item not exercised),
errors caught and ended with sys.exit(0) (fail), a leak of about 4x the baseline's slope (fail).
tests/e2e/test_probe_stability.py runs the four live and checks that their results still equal the recordings'."""
from __future__ import annotations

import pytest
from helpers import FIXTURES
from probe_runs import STABILITY_RUNS, judged_recording, recording, verdict_cell

from evalkit.probes.stability.plan import LEAK_FLOOR


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
    assert figures["items_not_exercised"] == 0 and figures["items_shared_with_torch"] == 0
    assert figures["resumes_bit_for_bit"] == 4 and figures["unsafe_loads"] == 0
    assert result["headline"] == "10/10 items"
    table = result["sections"][0]
    assert table.count("| pass |") == 10 and "bit for bit (resumed after step 18)" in table
    # flipped bytes caught by the checksum, and an intact copy of the same checkpoint resumed
    assert "refused it (the intact copy's resume, resume-intact, trained on): CorruptCheckpoint" in table
    # its long run against the baseline's long run beside it (the same loop): within the floor of it
    assert figures["leak_high"] <= figures["baseline_leak_kib_per_1k_steps"] + LEAK_FLOOR


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
    assert leak["size"].startswith("memory leak: rss grows") and "more than 2x the baseline's" in leak["size"]
    assert a["figures"]["leak_low"] > 200 * 1000                   # 300 KiB a step: about 300,000 KiB per 1,000
    assert a["figures"]["baseline_leak_high"] < a["figures"]["leak_low"]


def test_a_checkpoint_with_flipped_bytes_loaded_fails_as_shared_with_plain_torch():
    b = judged_recording("stability", "planted_b")          # in-place checkpoints: no checksum, as plain torch
    flipped = finding(b, "corrupt_flipped")
    assert flipped["size"].startswith("loaded the flipped checkpoint and trained steps 13..24 on it")
    assert flipped["size"].endswith("(shared with plain torch: torch.load checks no checksum)")
    assert flipped["evidence"]["shared_with_torch"] is True and flipped["job"] == "corrupt-flipped"
    assert b["figures"]["items_shared_with_torch"] == 1


def test_what_the_judge_once_let_pass_fails_or_is_not_exercised():
    """issue 28, tests/planted/quiet_loop.py: each case judged on what the wrapper did."""
    c = judged_recording("stability", "planted_c")
    assert not c["passed"] and not c["inconclusive"]
    data = finding(c, "kill_between")      # not reproducible, its data position lost: a fail, not "not exercised"
    assert data["first_step"] == 7 and "data position lost: step 7 trained on the samples of step 1" in data["size"]
    assert "not compared: parameters and loss (not reproducible" in data["size"]
    for item, what in (("out_of_memory", "out-of-memory error"), ("loss_error", "error in the loss function")):
        assert finding(c, item)["size"].startswith(f"the wrapper caught the {what} and exited with status 0 "
                                                   "(sys.exit): the error did not propagate")
    leak = finding(c, "long_run")             # about 4x the baseline's slope, beside it
    assert leak["size"].startswith("memory leak: rss grows")
    assert c["figures"]["leak_low"] > 2 * c["figures"]["baseline_leak_high"]
    assert all(f["code"] != "stability.corrupt_truncated" for f in c["findings"])     # an unrelated crash: no pass,
    assert any(n.startswith("corrupt_truncated: not exercised, the resume failed (ValueError") and   # no fail
               "so did the resume of an intact copy" in n for n in c["notes"])
    assert c["figures"]["items_not_exercised"] == 1
    assert c["headline"] == ("0/4 items, 1 not exercised: kill between, out of memory, loss error, long run; not run: "
                             "5 drills (kill after checkpoint, kill during write, kill ws2, …)")   # probe.only


def test_the_verdicts_stability_column_shows_the_failed_items():
    result = judged_recording("stability", "planted_b")
    cell = verdict_cell("stability", result, "unstable")
    assert cell.status == "fail" and cell.figure == result["headline"]
    assert cell.figure == ("0/4 items: kill between, kill after checkpoint, kill during write, corrupt flipped "
                           "(shared with plain torch); not run: 6 drills (kill ws2, corrupt truncated, corrupt other "
                           "model, …)")


def test_the_world_size_2_drill_picked_alone_is_judged_against_its_own_reference():
    """`probe.only=[kill_ws2]` runs reference-ws2, kill-ws2 and resume-ws2 and no world-size-1 reference: the item
    is judged against reference-ws2 (it once needed the world-size-1 `reference` and read "0/0 items")."""
    from evalkit.probes.stability.judge import judge

    jobs, _ = recording("stability", "baseline")
    ws2 = [j for j in jobs if j.name in ("reference-ws2", "kill-ws2", "resume-ws2")]
    assert len(ws2) == 3
    result = judge(ws2)
    assert result.passed and not result.inconclusive
    assert result.headline.startswith("1/1 items") and "kill ws2" not in result.headline.split("not run")[-1]
    assert result.figures["resumes_bit_for_bit"] == 1
