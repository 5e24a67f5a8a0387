"""The functional probe's judge on the recorded evidence of the e2e tier's probe runs (probe_runs.FUNCTIONAL_RUNS: the
baseline's loop under a name of its own, and tests/planted/swap_loop.py in both modes, recorded by
scripts/record_probe_fixtures.py into tests/fixtures/functional/).

The loop passes every counted item (logs is shown, not counted: it reads evalkit's own records), its resume
continuing bit for bit from a copy of its own step-8 checkpoint, and the verdict's functional column shows the
probe's pass. A wrapper that runs fp16_mixed on CPU as fp32 fails that item in both modes (issue 28): refused as a
silent substitution in aligned mode, observed running fp32 in defaults mode; the verdict's cell is a fail.
tests/e2e/test_probe_functional.py runs them live and checks that their results still equal the recordings';
planted failures of each item are tests/unit/probes/functional/test_judge.py.
"""
from __future__ import annotations

from helpers import FIXTURES
from probe_runs import FUNCTIONAL_RUNS, judged_recording, recording, verdict_cell

JOBS = ["plain", "baseline", "bf16_mixed", "fp16_mixed", "ws2", "pg", "resume"]


def test_every_run_of_the_e2e_tier_has_a_recording_and_nothing_else_does():
    recorded = {p.name.removesuffix(".json.gz") for p in (FIXTURES / "functional").glob("*.json.gz")}
    assert recorded == set(FUNCTIONAL_RUNS), "run: python scripts/record_probe_fixtures.py --probe functional"


def test_the_recording_holds_every_job_run_to_its_end():
    jobs, measured = recording("functional", "handwritten")
    assert measured is None and sorted(j.name for j in jobs) == sorted(JOBS)
    assert all(j.status == "FINISHED" and j.steps for j in jobs)


def test_the_baseline_passes_every_counted_item_and_logs_is_not_counted():
    result = judged_recording("functional", "handwritten")
    assert result["passed"] and not result["inconclusive"] and result["findings"] == []
    assert result["figures"]["items_passed"] == result["figures"]["items_total"] == 9
    assert result["figures"]["items_not_counted"] == 1 and result["figures"]["items_not_claimed"] == 0
    assert result["figures"]["checkpoint_ratio"] == 1.0 and result["figures"]["checkpoint_bytes"] > 0
    assert result["headline"] == "9/9 items; checkpoint 1.00x the baseline's"
    table = result["sections"][0]
    assert table.count("| pass |") == 9 and "| logs | not counted | evalkit's own records" in table
    assert "its losses equal the uninterrupted run's, bit for bit" in table


def test_a_silent_precision_swap_refused_in_aligned_mode_fails_the_item():
    jobs, _ = recording("functional", "swap_aligned")
    refused = next(j for j in jobs if j.name == "fp16_mixed")
    assert refused.status == "FAILED" and refused.failure_reason.startswith("UnsupportedCombination: ")
    assert refused.failure_reason.endswith("[refusal: silent-substitution]")
    result = judged_recording("functional", "swap_aligned")
    assert not result["passed"] and not result["inconclusive"] and result["figures"]["items_not_claimed"] == 0
    (finding,) = result["findings"]
    assert finding["code"] == "functional.precisions.fp16_mixed" and finding["title"] == "does not run fp16_mixed"
    assert finding["size"] == ("refused by the adapter because the wrapper would run something other than asked (a "
                               "silent substitution, not a documented limit): the wrapper runs fp16_mixed on cpu as "
                               "fp32 without a word; refused in aligned mode")
    assert result["headline"] == "8/9 items; checkpoint 1.00x the baseline's"
    assert verdict_cell("functional", result, "swap").status == "fail"


def test_the_same_swap_run_in_defaults_mode_fails_the_item_the_same_way():
    result = judged_recording("functional", "swap_defaults")
    (finding,) = result["findings"]
    assert finding["code"] == "functional.precisions.fp16_mixed"
    assert finding["size"] == "ran another precision than asked: requested fp16_mixed (float16), observed float32"
    assert result["headline"] == "8/9 items; checkpoint 1.00x the baseline's"
    assert verdict_cell("functional", result, "swap").status == "fail"


def test_the_verdicts_functional_column_shows_the_probes_pass():
    result = judged_recording("functional", "handwritten")
    functional = verdict_cell("functional", result, "handwritten")
    assert functional.status == "pass" and functional.figure == result["headline"]
