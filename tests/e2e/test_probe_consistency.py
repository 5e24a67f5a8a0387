"""The consistency probe end to end (issue 12): real `evalkit probe=consistency` runs, read back from the store.

The baseline against itself and a planted wrong loop (every gradient scaled by 0.9: tests/planted/planted_loop.py),
probe_runs.CONSISTENCY_RUNS: two seeds per arm keep the module short; the two probe runs go side by side, each in its
own directory and store. What the judge makes of them (identical and equivalent; diverging at step 1, no pass) is
asserted in the unit tier on their recorded evidence (tests/unit/probes/consistency/test_judge_recorded.py); here
the store holds what the probe runner logged, and each live result must still equal its recording's (then run
scripts/record_probe_fixtures.py --probe consistency).
"""
from __future__ import annotations

import json

import pytest
from helpers import probe_result
from probe_runs import CONSISTENCY_RUNS, judged_recording, rerecord, result_shape, run_probe_variants_side_by_side

from evalkit import names


@pytest.fixture(scope="module")
def probes(tmp_path_factory):
    """(client, probe run) of the baseline's probe and of the planted loop's, run side by side."""
    dirs = run_probe_variants_side_by_side(tmp_path_factory, "consistency")
    return {name: probe_result(workdir, "consistency")[:2] for name, workdir in dirs.items()}


def result_of(client, run) -> dict:
    with open(client.download_artifacts(run.info.run_id, "probe/consistency.json")) as fh:
        return json.load(fh)


def test_the_baseline_against_itself_is_identical_and_passes(probes):
    client, run = probes["baseline"]
    tags, metrics = run.data.tags, run.data.metrics
    assert run.info.status == "FINISHED" and tags[names.PROBE] == "consistency"
    assert tags[names.CALIBER].startswith("consistency|") and tags[names.TASK] == "mlp_regression"
    assert metrics[names.probe_pass("consistency")] == 1.0 and metrics["probe/consistency/identical"] == 1.0
    exp = client.get_experiment_by_name("evalkit").experiment_id
    children = client.search_runs([exp], f"tags.`mlflow.parentRunId` = '{run.info.run_id}'")
    assert sorted(c.data.tags[names.SEED] for c in children) == ["0", "0", "1", "1"]
    assert {c.data.tags[names.ROLE] for c in children} == {"probe_job"}


def test_a_planted_wrong_loop_does_not_pass(probes):
    client, run = probes["planted"]
    assert run.info.status == "FINISHED" and run.data.metrics.get(names.probe_pass("consistency")) != 1.0


@pytest.mark.parametrize("name", sorted(CONSISTENCY_RUNS))
def test_each_live_run_is_judged_as_its_recording(probes, name):
    live = result_of(*probes[name])
    exact = ("identical", "steps_compared", "first_diverging_step", "seeds")
    assert result_shape(live, *exact) == result_shape(judged_recording("consistency", name), *exact), \
        f"{name}: {rerecord('consistency')}"
