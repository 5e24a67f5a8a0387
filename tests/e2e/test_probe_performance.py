"""The performance probe end to end (issue 31): real `evalkit probe=performance` runs on a planted copy of the
baseline 30 % slower per step (tests/planted/slow_loop.py) and on an identical copy, each with its six jobs (a
baseline and a wrapper job per depth) alive at once and taking turns. Exact outcomes (probe_runs.PERFORMANCE_OUTCOMES):
the slower copy fails, the identical copy passes. The margin they rest on is measured by
scripts/bench_performance_probe.py (issue 31's note: a 10 % slower copy and an identical one, judged 10 times each);
30 % against a 5 % budget is five times the 10 % copy's margin.

Nothing else of the test session runs meanwhile (`machine_alone`): the probe times its jobs. What the judge makes of
the recorded evidence of these runs is asserted in the unit tier (tests/unit/probes/performance/
test_judge_recorded.py); when what a job records changed, run scripts/record_probe_fixtures.py --probe performance.
"""
from __future__ import annotations

import json
import os

import pytest
from helpers import ok, store_uri
from probe_runs import PERFORMANCE_OUTCOMES, PERFORMANCE_RUNS, probe_status, run_probe_variant

from evalkit import names


@pytest.fixture(scope="module")
def store(machine_alone, tmp_path_factory):
    """The slower copy, then the identical copy: their probe runs, oldest first."""
    workdir = tmp_path_factory.mktemp("performance")
    for name in PERFORMANCE_RUNS:
        ok(run_probe_variant(workdir, "performance", name))
    from mlflow.tracking import MlflowClient

    client = MlflowClient(store_uri(workdir))
    exp = client.get_experiment_by_name("evalkit").experiment_id
    runs = client.search_runs([exp], f"tags.`{names.ROLE}` = 'probe'", order_by=["attributes.start_time ASC"])
    return client, dict(zip(PERFORMANCE_RUNS, runs))


def result_of(client, run) -> dict:
    with open(client.download_artifacts(run.info.run_id, "probe/performance.json")) as fh:
        return json.load(fh)


@pytest.mark.parametrize("name", sorted(PERFORMANCE_RUNS))
def test_each_live_probe_run_decides_as_planted_and_logs_it(store, name):
    client, runs = store
    run, result = runs[name], result_of(client, runs[name])
    assert probe_status(result) == PERFORMANCE_OUTCOMES[name], result["notes"]
    assert run.data.tags[names.probe_status("performance")] == PERFORMANCE_OUTCOMES[name]
    assert run.data.metrics[names.probe_pass("performance")] == float(PERFORMANCE_OUTCOMES[name] == "pass")


def test_the_jobs_took_turns_pinned_to_one_core_with_the_light_profile(store):
    client, runs = store
    run = runs["slow"]
    assert run.data.tags[names.CALIBER].startswith("turns|hw=cpu|thr=1|")
    exp = client.get_experiment_by_name("evalkit").experiment_id
    children = client.search_runs([exp], f"tags.`mlflow.parentRunId` = '{run.info.run_id}'",
                                  order_by=["attributes.start_time ASC"])
    assert {c.info.status for c in children} == {"FINISHED"}
    profiled = sorted(c.info.run_name.rsplit("-", 3)[-3] for c in children if c.info.run_name.endswith("-profile"))
    assert profiled == ["d32"] * 2          # a cell that is not a pass: both arms profiled
    children = [c for c in children if not c.info.run_name.endswith("-profile")]
    assert sorted(c.data.tags[names.TRAINER] for c in children) == ["baseline"] * 3 + ["slow"] * 3
    assert {c.data.params["observe.profile"] for c in children} == {"timing"}
    assert {c.data.params["hardware.threads"] for c in children} == {"1"}
    with open(client.download_artifacts(run.info.run_id, "probe/performance_evidence.json")) as fh:
        jobs = json.load(fh)
    pinned = {tuple(j["summary"]["cpus"]) for j in jobs}
    assert len(pinned) == 1 and all(j["summary"]["cpus_pinned"] == (len(os.sched_getaffinity(0)) > 1) for j in jobs)
    timed = [j for j in jobs if not j["name"].endswith("-profile")]
    assert len({len(j["summary"]["turns"]["blocks_s"]) for j in timed}) == 1
