"""The functional probe end to end: a real `evalkit probe=functional` run of the baseline's loop into a local MLflow
store, read back from it. The verdict has no row for the baseline itself (it is every row's reference), so the loop
runs under a name of its own (probe_runs.FUNCTIONAL_RUNS: `trainer.name=handwritten`), as a third party's adapter
would. That it passes every item (its resume continuing bit for bit from a copy of its own step-8 checkpoint) and
what the verdict's functional column shows are asserted in the unit tier on the run's recorded evidence
(tests/unit/probes/functional/test_judge_recorded.py); here its jobs are child runs of the probe run, the resume
reads a checked copy of plain's checkpoints, the verdict reads the store, and the live result must still equal its
recording's (then run scripts/record_probe_fixtures.py --probe functional). tests/planted/swap_loop.py (fp16_mixed
on CPU refused as a silent substitution in aligned mode, run as fp32 in defaults mode) runs live in both modes and
must still equal its recordings: the item fails either way (issue 28). Planted failures of each item are the judge's
tests (tests/unit/probes/functional/test_judge.py)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers import ok, store_uri
from probe_runs import judged_recording, rerecord, result_shape, run_probe_variant

from evalkit import names

JOBS = ["plain", "baseline", "bf16_mixed", "fp16_mixed", "ws2", "pg", "resume"]


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    """(workdir, client, the probe run, its child runs by job name) of the baseline loop's functional probe."""
    from mlflow.tracking import MlflowClient

    workdir = tmp_path_factory.mktemp("functional")
    proc = run_probe_variant(workdir, "functional", "handwritten")
    ok(proc)
    print(next(line for line in proc.stderr.splitlines() if "functional probe" in line and "job" not in line))
    client = MlflowClient(store_uri(workdir))
    exp = client.get_experiment_by_name("evalkit").experiment_id
    (run,) = client.search_runs([exp], f"tags.`{names.ROLE}` = 'probe'")
    children = client.search_runs([exp], f"tags.`mlflow.parentRunId` = '{run.info.run_id}'")
    by_job = {c.info.run_name.rsplit("-", 1)[-1]: c for c in children}
    return workdir, client, run, by_job


def test_the_baseline_passes_every_item(probe):
    _, client, run, _ = probe
    tags, metrics = run.data.tags, run.data.metrics
    assert run.info.status == "FINISHED" and tags[names.PROBE] == "functional"
    assert tags[names.CALIBER].startswith("functional|") and tags[names.TASK] == "mlp_regression"
    assert metrics[names.probe_pass("functional")] == 1.0
    assert metrics["probe/functional/items_passed"] == metrics["probe/functional/items_total"] == 9
    assert metrics["probe/functional/checkpoint_ratio"] == 1.0 and metrics["probe/functional/checkpoint_bytes"] > 0


def test_the_live_run_is_judged_as_its_recording(probe):
    _, client, run, _ = probe
    with open(client.download_artifacts(run.info.run_id, "probe/functional.json")) as fh:
        live = json.load(fh)
    exact = ("items_total", "items_passed", "checkpoint_ratio")
    assert result_shape(live, *exact) == result_shape(judged_recording("functional", "handwritten"), *exact), \
        f"handwritten: {rerecord('functional')}"


def test_the_jobs_are_child_runs_and_the_resume_continues_a_checked_copy_of_plains_checkpoints(probe):
    workdir, _, run, by_job = probe
    assert sorted(by_job) == sorted(JOBS)
    assert {c.data.tags[names.ROLE] for c in by_job.values()} == {names.ROLE_PROBE_JOB}
    assert {j: c.data.tags[names.TRAINER] for j, c in by_job.items() if c.data.tags[names.TRAINER] != "handwritten"} \
        == {"baseline": "baseline"}                                          # the checkpoint-size reference
    resume = by_job["resume"].data.tags
    assert resume[names.RESUMED_AT_STEP] == "8"
    assert resume[names.RESUMED_FROM_RUN] == by_job["plain"].info.run_id        # plain's job.json was copied along
    assert names.RESUME_UNCHECKED not in resume
    source = Path(resume[names.RESUMED_FROM])
    assert source.parent.name == "resume-source"
    assert source.parent.parent == Path(by_job["plain"].data.tags[names.RUN_DIR]).parent
    assert sorted(os.listdir(source)) == ["step_00000004.pt", "step_00000004.pt.sha256",
                                          "step_00000008.pt", "step_00000008.pt.sha256"]


def test_the_verdicts_functional_column_shows_the_probes_pass(probe):
    from evalkit.analysis import store
    from evalkit.verdict import VerdictOptions, build_verdict

    workdir, _, run, _ = probe
    _, _, records = store.read_runs(store_uri(workdir), "evalkit")
    (row,) = build_verdict(records, VerdictOptions()).rows
    assert row.key.trainer == "handwritten"
    functional = row.dimensions["functional"]
    assert functional.status == "pass" and functional.figure == run.data.tags[names.probe_headline("functional")]


SWAPS = ("swap_aligned", "swap_defaults")


@pytest.fixture(scope="module")
def swaps(tmp_path_factory):
    """{name: the probe's stored result} of each planted precision swap, run side by side."""
    from concurrent.futures import ThreadPoolExecutor

    from mlflow.tracking import MlflowClient

    dirs = {name: tmp_path_factory.mktemp(name) for name in SWAPS}
    with ThreadPoolExecutor(len(dirs)) as pool:
        procs = [pool.submit(run_probe_variant, dirs[name], "functional", name) for name in SWAPS]
        for proc in procs:
            ok(proc.result())
    out = {}
    for name, workdir in dirs.items():
        client = MlflowClient(store_uri(workdir))
        exp = client.get_experiment_by_name("evalkit").experiment_id
        (run,) = client.search_runs([exp], f"tags.`{names.ROLE}` = 'probe'")
        with open(client.download_artifacts(run.info.run_id, "probe/functional.json")) as fh:
            out[name] = json.load(fh)
    return out


@pytest.mark.parametrize("name", SWAPS)
def test_a_silent_precision_swap_fails_its_item_live_as_recorded(swaps, name):
    live = swaps[name]
    assert [f["code"] for f in live["findings"]] == ["functional.precisions.fp16_mixed"] and not live["passed"]
    exact = ("items_total", "items_passed", "items_not_claimed", "checkpoint_ratio")
    assert result_shape(live, *exact) == result_shape(judged_recording("functional", name), *exact), \
        f"{name}: {rerecord('functional')}"
