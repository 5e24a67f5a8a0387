"""The customization probe's judge (issue 14) on the recorded evidence and measurements of the e2e tier's three probe
runs (probe_runs.CUSTOMIZATION_RUNS, recorded by scripts/record_probe_fixtures.py into tests/fixtures/customization/).

The baseline's two customizations (adapters/custom/baseline_*.py) are verified and cost a few lines. Planted ones
(tests/planted/custom_loop.py) that do not take effect are caught and named: a custom loss computed and ignored,
one with the wrong weight, a callback registered but never called (training does not stop either), a callback that
fires per micro-batch and touches a private attribute (counted, and over the limit of 0 it fails the probe); the
verdict's column shows the lines and the private touches. tests/e2e/test_probe_customization.py runs the three live
and checks that their results still equal the recordings'."""
from __future__ import annotations

import pytest
from helpers import FIXTURES
from probe_runs import CUSTOMIZATION_RUNS, judged_recording, recording, verdict_cell


def codes(result: dict) -> list[str]:
    return [f["code"] for f in result["findings"]]


def test_every_run_of_the_e2e_tier_has_a_recording_with_its_measurements_and_nothing_else_does():
    folder = FIXTURES / "customization"
    recorded = {p.name.removesuffix(".json.gz") for p in folder.glob("*.json.gz")}
    assert recorded == set(CUSTOMIZATION_RUNS) | {f"{n}.measured" for n in CUSTOMIZATION_RUNS}, \
        "run: python scripts/record_probe_fixtures.py --probe customization"


@pytest.mark.parametrize("name", sorted(CUSTOMIZATION_RUNS))
def test_each_recording_holds_both_jobs_and_both_sources(name):
    jobs, measured = recording("customization", name)
    assert sorted(j.name for j in jobs) == ["callback", "loss"]
    assert all(j.status == "FINISHED" and j.steps and j.params for j in jobs)
    assert sorted(measured["sources"]) == ["callback", "loss"] and measured["limits"]["max_private"] == 0
    control = measured["control"]                # the baseline's own customizations, measured in the same run
    assert control["trainer"] == "baseline" and sorted(control["sources"]) == ["callback", "loss"]
    assert control["sources"]["loss"]["module"] == "evalkit.adapters.custom.baseline_loss.BaselineCustomLoss"


def test_the_baselines_customizations_take_effect_and_cost_a_few_lines():
    result = judged_recording("customization", "baseline")
    assert result["passed"] and result["findings"] == []
    figures = result["figures"]
    assert figures["loss_steps_checked"] == figures["loss_steps_matching"] == 12
    assert figures["callback_calls"] == 10 and figures["callback_steps_run"] == 10
    assert 0 < figures["loss_lines"] <= 10 and 0 < figures["callback_lines"] <= 10
    assert figures["loss_line_ratio"] == figures["callback_line_ratio"] == 1.0       # it is its own control
    assert figures["private_touches"] == 0
    assert result["headline"].startswith("loss ") and result["headline"].endswith("0 private")
    assert "training_loss (evalkit.adapters.baseline.BaselineAdapter)" in result["sections"][0]


def test_a_custom_loss_that_is_computed_but_ignored_is_caught():
    result = judged_recording("customization", "planted_a")
    ignored = next(f for f in result["findings"] if f["code"] == "loss.ignored")
    assert ignored["first_step"] == 1 and ignored["size"].startswith("12/12 steps")
    assert "NOT in effect" in result["headline"]


def test_a_custom_loss_with_another_weight_follows_neither_formula():
    result = judged_recording("customization", "planted_b")
    assert "loss.neither" in codes(result) and "loss.ignored" not in codes(result)


def test_a_callback_registered_but_never_called_is_caught_and_training_did_not_stop():
    result = judged_recording("customization", "planted_a")
    assert "callback.never_fired" in codes(result)
    stop = next(f for f in result["findings"] if f["code"] == "callback.stop")
    assert stop["title"] == "training did not stop when the callback asked"
    assert result["figures"]["callback_calls"] == 0 and result["figures"]["callback_steps_run"] == 16
    assert not result["passed"]


def test_a_callback_firing_per_micro_batch_and_a_private_touch_are_caught():
    result = judged_recording("customization", "planted_b")
    per_micro = next(f for f in result["findings"] if f["code"] == "callback.per_micro_batch")
    assert per_micro["size"].startswith("up to 2 reports per step (20 in 10 steps)")
    assert "callback.stop" not in codes(result)        # it did stop after step 10
    private = next(f for f in result["findings"] if f["code"] == "private")
    # custom_loop.py is both customizations' source: its one touch is counted for each
    assert "callback: attribute job.task.model._modules (line" in private["size"]
    assert result["figures"]["private_touches"] == 2
    assert not result["passed"] and not result["inconclusive"]


def test_the_verdicts_customization_column_shows_lines_and_private_touches():
    result = judged_recording("customization", "planted_b")
    cell = verdict_cell("customization", result, "planted_custom")
    assert cell.status == "fail" and cell.figure == result["headline"]
    assert cell.figure.startswith("loss ") and "NOT in effect" in cell.figure and cell.figure.endswith("2 private")


def test_a_customization_costing_more_than_twice_the_baselines_lines_is_a_finding():
    """Issue 28 (e): custom_loop.py (both planted customizations' module, 32 logical lines) against the baseline's
    own 7 lines for each customization, measured in the same probe run."""
    result = judged_recording("customization", "planted_b")
    lines = {f["code"]: f for f in result["findings"] if f["code"].endswith(".lines")}
    assert sorted(lines) == ["callback.lines", "loss.lines"]
    assert lines["loss.lines"]["title"] == (f"the loss customization adds {result['figures']['loss_lines']:.0f} "
                                            f"logical lines, {result['figures']['loss_line_ratio']:.2f}x the "
                                            f"baseline's {result['figures']['loss_baseline_lines']:.0f} for the same "
                                            "customization")
    assert result["figures"]["loss_line_ratio"] > 2 and lines["loss.lines"]["size"].startswith("limit 2x the baseline")
