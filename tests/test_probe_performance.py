"""The performance probe end to end (issue 12): real `evalkit probe=performance` runs on a planted slower copy of
the baseline (tests/planted/slow_loop.py: every step waits 10 % of its own work) and on an identical copy.

Nothing else of the test session runs meanwhile (`machine_alone`): the probe times its jobs.
"""
from __future__ import annotations

import json
import os
import statistics
from pathlib import Path

import pytest
from helpers import ok, run_evalkit, store_uri

from evalkit import names

pytestmark = pytest.mark.e2e

PLANTED = Path(__file__).parent / "planted"
SLOW = ["trainer._target_=slow_loop.SlowBaselineAdapter", "trainer.name=slow"]
WIDTH = 256
SETTINGS = ["probe=performance", "probe.repeats=5", f"probe.widths=[{WIDTH}]", "probe.steps=40",
            "hardware.threads=1"]


@pytest.fixture(scope="module")
def store(machine_alone, tmp_path_factory):
    """The slower copy probed twice, then the identical copy once."""
    workdir = tmp_path_factory.mktemp("performance")
    env = {"PYTHONPATH": os.pathsep.join([str(PLANTED), os.environ.get("PYTHONPATH", "")])}
    for slower in ("0.1", "0.1", "0.0"):
        ok(run_evalkit(workdir, *SETTINGS, *SLOW, f"+trainer.options.slower={slower}", env=env))
    from mlflow.tracking import MlflowClient

    client = MlflowClient(store_uri(workdir))
    exp = client.get_experiment_by_name("evalkit").experiment_id
    runs = client.search_runs([exp], f"tags.`{names.ROLE}` = 'probe'", order_by=["attributes.start_time ASC"])
    return client, runs


def result_of(client, run) -> dict:
    with open(client.download_artifacts(run.info.run_id, "probe/performance.json")) as fh:
        return json.load(fh)


def planted_ms(client, run) -> float:
    """The median wait the slower copy's jobs planted per step (their effective config)."""
    with open(client.download_artifacts(run.info.run_id, "probe/performance_evidence.json")) as fh:
        jobs = json.load(fh)
    return statistics.median(j["effective"]["planted_added_ms"] for j in jobs if j["name"].endswith("-wrapper"))


def test_the_slower_copy_is_reported_slower_with_its_planted_cost(store):
    client, runs = store
    for run in runs[:2]:
        figures = result_of(client, run)["figures"]
        assert figures[f"h{WIDTH}/stable"] == 1.0, result_of(client, run)["notes"]
        assert figures[f"h{WIDTH}/ratio_low"] > 1.0, figures
        planted = planted_ms(client, run)
        assert figures[f"h{WIDTH}/added_ms"] == pytest.approx(planted, rel=0.2), (figures, planted)
        assert "ms/step" in run.data.tags[names.probe_headline("performance")]


def test_two_runs_on_the_same_pair_give_overlapping_intervals(store):
    client, runs = store
    a, b = (result_of(client, r)["figures"] for r in runs[:2])
    key = f"h{WIDTH}/ratio"
    assert a[key + "_low"] <= b[key + "_high"] and b[key + "_low"] <= a[key + "_high"], (a, b)


def test_the_identical_copy_is_not_reported_slower(store):
    client, runs = store
    result = result_of(client, runs[2])
    assert result["figures"][f"h{WIDTH}/ratio_low"] <= 1.0, result["figures"]
    assert runs[2].data.tags[names.probe_status("performance")] in ("pass", "inconclusive")


def test_the_jobs_alternate_in_fresh_processes_with_the_light_profile(store):
    client, runs = store
    run = runs[0]
    assert run.data.tags[names.CALIBER].startswith("timed|hw=cpu|thr=1|")
    exp = client.get_experiment_by_name("evalkit").experiment_id
    children = client.search_runs([exp], f"tags.`mlflow.parentRunId` = '{run.info.run_id}'",
                                  order_by=["attributes.start_time ASC"])
    arms = [c.data.tags[names.TRAINER] for c in children]
    assert arms == ["baseline", "slow", "slow", "baseline", "baseline", "slow", "slow", "baseline", "baseline", "slow"]
    assert {c.data.params["observe.profile"] for c in children} == {"timing"}
    result = result_of(client, run)
    assert result["figures"]["startup/first_step_s/baseline"] > result["figures"]["startup/torch_imported_s/baseline"]
    assert any("Start-up" in s for s in result["sections"])
