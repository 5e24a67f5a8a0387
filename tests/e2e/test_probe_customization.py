"""The customization probe end to end (issue 14): real `evalkit probe=customization` runs read back from the store.

The baseline's two customizations (adapters/custom/baseline_*.py), and two planted pairs of them
(tests/planted/custom_loop.py) that do not take effect: probe_runs.CUSTOMIZATION_RUNS, the three probe runs side by
side. What the judge makes of them (the baseline's verified at a few lines; an ignored loss, a loss of another
weight, a callback never called, one per micro-batch touching a private attribute, each named; the verdict's column)
is asserted in the unit tier on their recorded evidence and measurements
(tests/unit/probes/customization/test_judge_recorded.py); here the store holds what the probe runner logged, the
verdict reads it, and each live result must still equal its recording's (then run
scripts/record_probe_fixtures.py --probe customization).
"""
from __future__ import annotations

import pytest
from helpers import probe_result, store_uri
from probe_runs import CUSTOMIZATION_RUNS, judged_recording, rerecord, result_shape, run_probe_variants_side_by_side

from evalkit import names


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """name -> (probe run, its customization.json), the three probe runs side by side."""
    dirs = run_probe_variants_side_by_side(tmp_path_factory, "customization")
    out = {name: probe_result(workdir, "customization")[1:] for name, workdir in dirs.items()}
    out["uris"] = {name: store_uri(d) for name, d in dirs.items()}
    return out


def test_the_baselines_customizations_take_effect(results):
    run, _ = results["baseline"]
    assert run.data.metrics[names.probe_pass("customization")] == 1.0


def test_the_planted_customizations_fail_the_probe(results):
    run, _ = results["planted_b"]
    assert run.data.metrics[names.probe_pass("customization")] == 0.0
    assert run.data.tags[names.probe_status("customization")] == "fail"


@pytest.mark.parametrize("name", sorted(CUSTOMIZATION_RUNS))
def test_each_live_run_is_judged_as_its_recording(results, name):
    _, live = results[name]
    exact = ("loss_steps_checked", "loss_steps_matching", "callback_calls", "callback_steps_run", "loss_lines",
             "callback_lines", "private_touches")
    assert result_shape(live, *exact) == result_shape(judged_recording("customization", name), *exact), \
        f"{name}: {rerecord('customization')}"


def test_the_verdicts_customization_column_shows_the_probes_headline(results):
    from evalkit.analysis import store
    from evalkit.verdict import VerdictOptions, build_verdict

    run, _ = results["planted_b"]
    _, _, records = store.read_runs(results["uris"]["planted_b"], "evalkit")
    (row,) = build_verdict(records, VerdictOptions()).rows
    cell = row.dimensions["customization"]
    assert row.key.trainer == "planted_custom" and cell.status == "fail"
    assert cell.figure == run.data.tags[names.probe_headline("customization")]
