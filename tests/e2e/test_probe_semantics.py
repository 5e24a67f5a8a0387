"""The semantic probe end to end (issue 10): real `evalkit probe=semantics` runs, read back from the store.

A planted wrong variant of the baseline loop (tests/planted/planted_loop.py) carries one known wrong semantics
each; the probe must name it (its code) and the step where it first shows, from the records alone. The correct
baseline yields nothing. Every variant's finding is asserted in the unit tier on its recorded evidence
(tests/unit/probes/semantics/test_judge_planted.py); here one variant of each family (semantics_runs.SEMANTICS_PLANTED:
lr, loss, window, clip, wd, order, forward, val, steps, precision, unexplained, ddp) trains live, and its result
must still equal what the judge makes of its recording: a changed observer, record or task shows here first
(then run scripts/record_probe_fixtures.py). A planted loop whose optimizer bypasses torch's optimizer hooks
(semantics_runs.SEMANTICS_INCONCLUSIVE, tests/planted/silent_loop.py) trains live too: inconclusive, never a pass
(issue 28). The runs of one setting share one multirun.
"""
from __future__ import annotations

import json

import pytest
from helpers import PLANTED, ok, run_evalkit, store_uri
from semantics_runs import (
    RECORDED_SEMANTICS,
    SEMANTICS_INCONCLUSIVE,
    assert_semantic_finding,
    assert_semantic_inconclusive,
    recorded_evidence,
    semantics_live_groups,
)

from evalkit import names
from evalkit.probes.semantics.judge import judge

PLANTED_TRAINER = ["trainer._target_=planted_loop.PlantedAdapter", "trainer.name=planted"]


LIVE = semantics_live_groups()


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """Every probe run of this module: the baseline's four jobs, the correct planted loop, then one planted
    variant of each family."""
    workdir = tmp_path_factory.mktemp("semantics")
    ok(run_evalkit(workdir, "probe=semantics", "trainer=baseline"))
    ok(run_evalkit(workdir, "probe=semantics", *PLANTED_TRAINER, "probe.world_sizes=[1]", "probe.clip=[false]",
                   "+trainer.options.wrong=none", env={"PYTHONPATH": str(PLANTED)}))
    for setting, variants in LIVE:
        ok(run_evalkit(workdir, "probe=semantics", *PLANTED_TRAINER, *setting,
                       f"+trainer.options.wrong={','.join(variants)}", multirun=True, timeout=1200,
                       env={"PYTHONPATH": str(PLANTED)}))
    from mlflow.tracking import MlflowClient

    return workdir, MlflowClient(store_uri(workdir))


def probe_runs(client, **tags):
    query = " and ".join([f"tags.`{names.ROLE}` = 'probe'"] + [f"tags.`{k}` = '{v}'" for k, v in tags.items()])
    return client.search_runs([client.get_experiment_by_name("evalkit").experiment_id], query, max_results=100)


def result_of(client, run) -> dict:
    with open(client.download_artifacts(run.info.run_id, "probe/semantics.json")) as fh:
        return json.load(fh)


def planted_result(client, variant: str) -> dict:
    (run,) = [r for r in probe_runs(client, **{names.TRAINER: "planted"})
              if r.data.params.get("trainer.options.wrong") == variant]
    return result_of(client, run)


def test_the_baseline_passes_with_no_finding_and_its_jobs_are_children_of_the_probe_run(store):
    _, client = store
    (run,) = probe_runs(client, **{names.TRAINER: "baseline"})
    tags, metrics = run.data.tags, run.data.metrics
    assert tags[names.PROBE] == "semantics" and tags[names.MODE] == "aligned" and tags[names.TASK] == "mlp_regression"
    assert tags[names.CALIBER].startswith("truth|") and run.info.status == "FINISHED"
    assert metrics[names.probe_pass("semantics")] == 1.0 and metrics["probe/semantics/findings"] == 0
    result = result_of(client, run)
    assert result["passed"] and result["findings"] == [] and not result["inconclusive"]
    assert result["figures"]["steps_checked"] == result["figures"]["steps_asked"] == 80     # 8 jobs, tokens at 1 and 2
    assert all(sum(result["series"][clip]["clip_binds"]) >= 5 for clip in ("ws1-clip", "ws2-clip"))
    assert set(result["series"]) == {"ws1-noclip", "ws1-clip", "ws2-noclip", "ws2-clip", "ws1-adamw", "ws1-shortepoch",
                                     "ws1-tokens", "ws2-tokens"}
    exp = client.get_experiment_by_name("evalkit").experiment_id
    children = client.search_runs([exp], f"tags.`mlflow.parentRunId` = '{run.info.run_id}'")
    assert sorted(c.data.tags[names.ROLE] for c in children) == ["probe_job"] * 8
    assert sorted(c.data.tags[names.WORLD_SIZE] for c in children) == ["1", "1", "1", "1", "1", "2", "2", "2"]
    tokens = [c for c in children if c.data.tags[names.TASK] == "tiny_lm"]
    assert sorted(c.data.tags[names.WORLD_SIZE] for c in tokens) == ["1", "2"]
    assert all(c.data.params["train.optimizer"] == "sgd" and c.data.params["train.grad_accum"] == "3" for c in tokens)
    (short,) = [c for c in children if c.data.params["task.n_train"] == "8"]     # 2 micro-batches, windows of 3
    assert short.data.params["train.grad_accum"] == "3" and short.data.params["train.optimizer"] == "sgd"
    adamw = [c for c in children if c.data.params["train.optimizer"] == "adamw"]
    assert len(adamw) == 1 and adamw[0].data.params["train.weight_decay"] == "0.1"
    clipped = [c for c in children if c.data.params["train.grad_clip"] != "None"]
    assert len(clipped) == 2 and all(0 < float(c.data.params["train.grad_clip"]) < 2 for c in clipped)
    listed = {a.path for a in client.list_artifacts(run.info.run_id, "probe")}
    assert listed == {"probe/semantics.json", "probe/semantics.md", "probe/semantics_evidence.json"}


def test_the_correct_planted_loop_yields_nothing(store):
    _, client = store
    result = planted_result(client, "none")
    assert result["findings"] == [] and result["passed"] and not result["inconclusive"]


def _codes(result: dict) -> list[tuple[str, int | None]]:
    return sorted((f["code"], f["first_step"]) for f in result["findings"])


@pytest.mark.parametrize("variant", [v for _, variants in LIVE for v in variants])
def test_each_live_planted_family_is_named_and_matches_its_recording(store, variant):
    _, client = store
    live = planted_result(client, variant)
    if variant in SEMANTICS_INCONCLUSIVE:
        assert_semantic_inconclusive(live, variant)
        (run,) = [r for r in probe_runs(client, **{names.TRAINER: "planted"})
                  if r.data.params.get("trainer.options.wrong") == variant]
        assert names.probe_pass("semantics") not in run.data.metrics      # no pass logged: the verdict's inconclusive
        assert run.data.tags[names.probe_status("semantics")] == "inconclusive"
    else:
        assert_semantic_finding(live, variant)
    recorded = json.loads(judge(recorded_evidence(RECORDED_SEMANTICS / f"{variant}.json.gz")).to_json())
    assert (_codes(live), live["inconclusive"], live["headline"]) == \
        (_codes(recorded), recorded["inconclusive"], recorded["headline"]), \
        f"{variant}: the recording no longer matches a live run: run python scripts/record_probe_fixtures.py"
