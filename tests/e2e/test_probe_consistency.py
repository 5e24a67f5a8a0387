"""The consistency probe end to end (issue 12): real `evalkit probe=consistency` runs, read back from the store.

The baseline against itself is identical step by step and equivalent at the end; a planted wrong loop (every
gradient scaled by 0.9: tests/planted/planted_loop.py) diverges at step 1 and does not pass. Two seeds per arm keep
the module short; the two probe runs go side by side, each in its own directory and store.
"""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from helpers import PLANTED, ok, run_evalkit, store_uri

from evalkit import names

PLANTED_TRAINER = ["trainer._target_=planted_loop.PlantedAdapter", "trainer.name=planted",
                   "+trainer.options.wrong=unexplained"]
SEEDS = ["probe.seeds=2"]


@pytest.fixture(scope="module")
def probes(tmp_path_factory):
    """(client, probe run) of the baseline's probe and of the planted loop's, run side by side."""
    from mlflow.tracking import MlflowClient

    runs = {"baseline": (["trainer=baseline"], {}), "planted": (PLANTED_TRAINER, {"PYTHONPATH": str(PLANTED)})}
    dirs = {name: tmp_path_factory.mktemp(name) for name in runs}
    with ThreadPoolExecutor(len(runs)) as pool:
        procs = {name: pool.submit(run_evalkit, dirs[name], "probe=consistency", *overrides, *SEEDS, env=env)
                 for name, (overrides, env) in runs.items()}
        procs = {name: p.result() for name, p in procs.items()}
    out = {}
    for name, proc in procs.items():
        ok(proc)
        print(next(line for line in proc.stderr.splitlines() if "consistency probe" in line and "job" not in line))
        client = MlflowClient(store_uri(dirs[name]))
        exp = client.get_experiment_by_name("evalkit").experiment_id
        (run,) = client.search_runs([exp], f"tags.`{names.ROLE}` = 'probe'")
        out[name] = client, run
    return out


def result_of(client, run) -> dict:
    with open(client.download_artifacts(run.info.run_id, "probe/consistency.json")) as fh:
        return json.load(fh)


def test_the_baseline_against_itself_is_identical_and_passes(probes):
    client, run = probes["baseline"]
    tags, metrics = run.data.tags, run.data.metrics
    assert run.info.status == "FINISHED" and tags[names.PROBE] == "consistency"
    assert tags[names.CALIBER].startswith("consistency|") and tags[names.TASK] == "mlp_regression"
    assert metrics[names.probe_pass("consistency")] == 1.0 and metrics["probe/consistency/identical"] == 1.0
    result = result_of(client, run)
    assert result["passed"] and not result["inconclusive"] and result["findings"] == []
    assert result["headline"].startswith("identical 80 steps; Δ+0.00% [+0.00,+0.00] equivalent")
    exp = client.get_experiment_by_name("evalkit").experiment_id
    children = client.search_runs([exp], f"tags.`mlflow.parentRunId` = '{run.info.run_id}'")
    assert sorted(c.data.tags[names.SEED] for c in children) == ["0", "0", "1", "1"]
    assert {c.data.tags[names.ROLE] for c in children} == {"probe_job"}


def test_a_planted_wrong_loop_diverges_at_step_1_and_does_not_pass(probes):
    client, run = probes["planted"]
    assert run.info.status == "FINISHED" and run.data.metrics.get(names.probe_pass("consistency")) != 1.0
    result = result_of(client, run)
    assert not result["passed"]
    assert result["headline"].startswith("diverges from step 1")
    assert result["figures"]["first_diverging_step"] == 1 and result["figures"]["identical"] == 0
    assert result["figures"]["final_delta"] > 0.005          # a gradient scaled by 0.9: slower, a higher MSE
    if not result["inconclusive"]:                            # two seeds: a systematic shift, or undecided
        assert result["findings"][0]["code"] == "consistency.final_metric"
    else:
        assert result["notes"][0].startswith("stage 2 inconclusive")
