"""The customization probe end to end (issue 14): real `evalkit probe=customization` runs read back from the store.

The baseline's two customizations (adapters/custom/baseline_*.py) are verified and cost a few lines. Planted ones
(tests/planted/custom_loop.py) that do not take effect are caught and named: a custom loss computed and ignored,
one with the wrong weight, a callback registered but never called (training does not stop either), a callback that
fires per micro-batch and touches a private attribute (counted, and over the limit of 0 it fails the probe).
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from helpers import PLANTED, ok, probe_result, run_evalkit, store_uri

from evalkit import names

PLANTED_AS = ["trainer=baseline", "trainer.name=planted_custom"]
RUNS = {
    "baseline": ["trainer=baseline"],
    "planted_a": PLANTED_AS + ["trainer.customizations.loss=custom_loop.IgnoredLoss",
                               "trainer.customizations.callback=custom_loop.SilentCallback"],
    "planted_b": PLANTED_AS + ["trainer.customizations.loss=custom_loop.WrongWeightLoss",
                               "trainer.customizations.callback=custom_loop.PerMicroBatchCallback"],
}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """name -> (probe run, its customization.json), the three probe runs side by side."""

    dirs = {name: tmp_path_factory.mktemp(name) for name in RUNS}
    with ThreadPoolExecutor(len(RUNS)) as pool:
        procs = {name: pool.submit(run_evalkit, dirs[name], "probe=customization", *overrides,
                                   env={"PYTHONPATH": str(PLANTED)}) for name, overrides in RUNS.items()}
        procs = {name: p.result() for name, p in procs.items()}
    out = {}
    for name, proc in procs.items():
        ok(proc)
        out[name] = probe_result(dirs[name], "customization")[1:]
    out["uris"] = {name: store_uri(d) for name, d in dirs.items()}
    return out


def codes(result: dict) -> list[str]:
    return [f["code"] for f in result["findings"]]


def test_the_baselines_customizations_take_effect_and_cost_a_few_lines(results):
    run, result = results["baseline"]
    assert run.data.metrics[names.probe_pass("customization")] == 1.0
    assert result["passed"] and result["findings"] == []
    figures = result["figures"]
    assert figures["loss_steps_checked"] == figures["loss_steps_matching"] == 12
    assert figures["callback_calls"] == 10 and figures["callback_steps_run"] == 10
    assert 0 < figures["loss_lines"] <= 10 and 0 < figures["callback_lines"] <= 10
    assert figures["private_touches"] == 0
    assert result["headline"].startswith("loss ") and result["headline"].endswith("0 private")
    assert "training_loss (adapters.baseline.BaselineAdapter)" in result["sections"][0]


def test_a_custom_loss_that_is_computed_but_ignored_is_caught(results):
    _, result = results["planted_a"]
    ignored = next(f for f in result["findings"] if f["code"] == "loss.ignored")
    assert ignored["first_step"] == 1 and ignored["size"].startswith("12/12 steps")
    assert "NOT in effect" in result["headline"]


def test_a_custom_loss_with_another_weight_follows_neither_formula(results):
    _, result = results["planted_b"]
    assert "loss.neither" in codes(result) and "loss.ignored" not in codes(result)


def test_a_callback_registered_but_never_called_is_caught_and_training_did_not_stop(results):
    _, result = results["planted_a"]
    assert "callback.never_fired" in codes(result)
    stop = next(f for f in result["findings"] if f["code"] == "callback.stop")
    assert stop["title"] == "training did not stop when the callback asked"
    assert result["figures"]["callback_calls"] == 0 and result["figures"]["callback_steps_run"] == 16
    assert not result["passed"]


def test_a_callback_firing_per_micro_batch_and_a_private_touch_are_caught(results):
    run, result = results["planted_b"]
    per_micro = next(f for f in result["findings"] if f["code"] == "callback.per_micro_batch")
    assert per_micro["size"].startswith("up to 2 reports per step (20 in 10 steps)")
    assert "callback.stop" not in codes(result)        # it did stop after step 10
    private = next(f for f in result["findings"] if f["code"] == "private")
    # custom_loop.py is both customizations' source: its one touch is counted for each
    assert "callback: attribute job.task.model._modules (line" in private["size"]
    assert result["figures"]["private_touches"] == 2
    assert run.data.metrics[names.probe_pass("customization")] == 0.0
    assert run.data.tags[names.probe_status("customization")] == "fail"


def test_the_verdicts_customization_column_shows_lines_and_private_touches(results):
    from evalkit.analysis import store
    from evalkit.verdict import VerdictOptions, build_verdict

    run, _ = results["planted_b"]
    _, _, records = store.read_runs(results["uris"]["planted_b"], "evalkit")
    (row,) = build_verdict(records, VerdictOptions()).rows
    cell = row.dimensions["customization"]
    assert row.key.trainer == "planted_custom" and cell.status == "fail"
    assert cell.figure == run.data.tags[names.probe_headline("customization")]
    assert cell.figure.startswith("loss ") and "NOT in effect" in cell.figure and cell.figure.endswith("2 private")
