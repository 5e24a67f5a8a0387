"""The semantic probe end to end (issue 10): real `evalkit probe=semantics` runs, read back from the store.

A planted wrong variant of the baseline loop (tests/planted/planted_loop.py) carries one known wrong semantics
each; the probe must name it (its code) and the step where it first shows, from the records alone. The correct
baseline yields nothing; a deviation no alternative semantics reproduces is reported as unexplained. The runs
of one setting share one multirun (`probe.world_sizes`, `probe.clip` pick the jobs each variant needs).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import ok, run_evalkit, store_uri

from evalkit import names

pytestmark = pytest.mark.e2e

PLANTED = Path(__file__).parent / "planted"
PLANTED_TRAINER = ["trainer._target_=planted_loop.PlantedAdapter", "trainer.name=planted"]

# variant -> (finding code, first step); each run with the jobs its setting names below
WS1 = {
    "lr.per_micro_batch": ("lr.per_micro_batch", 2), "lr.per_epoch": ("lr.per_epoch", 2),
    "lr.twice_per_step": ("lr.twice_per_step", 2), "lr.warmup_off_by_one": ("lr.warmup_off_by_one", 1),
    "lr.warmup_unit": ("lr.warmup_unit", 1), "loss.window_summed": ("loss.window_summed", 1),
    "window.short_underscaled": ("window.short_underscaled", 4), "window.short_dropped": ("window.short_dropped", 4),
    "window.short_carried": ("window.short_carried", 4), "window.short_merged": ("window.short_merged", 4),
    "clip.unasked": ("clip.unasked", None),
    "wd.unasked": ("wd.unasked", 1), "order.shuffled": ("order.shuffled", 1),
    "forward.before_training": ("forward.before_training", 0), "forward.extra_train": ("forward.extra_train", 1),
    "val.train_mode": ("val.train_mode", 4), "val.cadence": ("val.cadence", 1),
    "steps.extra": ("steps.extra", 11), "steps.fewer": ("steps.fewer", 10),
    "precision.mismatch": ("precision.mismatch", 1), "unexplained": ("unexplained.update", 1),
}
WS1_BOTH_JOBS = {"clip.per_micro_batch": ("clip.per_micro_batch", None),
                 "clip.before_unscale": ("clip.before_unscale", 1), "order.fixed_seed": ("order.fixed_seed", 1)}
WS2 = {"ddp.grad_summed": ("ddp.grad_summed", 1), "order.distributed_interleave": ("order.distributed_interleave", 1),
       "order.padded": ("order.padded", 1)}
SETTINGS = [(WS1, ["probe.world_sizes=[1]", "probe.clip=[false]"]), (WS1_BOTH_JOBS, ["probe.world_sizes=[1]"]),
            (WS2, ["probe.world_sizes=[2]", "probe.clip=[false]"])]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """Every probe run of this module: the baseline's four jobs, then each planted variant."""
    workdir = tmp_path_factory.mktemp("semantics")
    ok(run_evalkit(workdir, "probe=semantics", "trainer=baseline"))
    ok(run_evalkit(workdir, "probe=semantics", *PLANTED_TRAINER, "probe.world_sizes=[1]", "probe.clip=[false]",
                   "+trainer.options.wrong=none", env={"PYTHONPATH": str(PLANTED)}))
    for variants, setting in SETTINGS:
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
    assert result["passed"] and result["findings"] == []
    assert set(result["series"]) == {"ws1-noclip", "ws1-clip", "ws2-noclip", "ws2-clip"}
    exp = client.get_experiment_by_name("evalkit").experiment_id
    children = client.search_runs([exp], f"tags.`mlflow.parentRunId` = '{run.info.run_id}'")
    assert sorted(c.data.tags[names.ROLE] for c in children) == ["probe_job"] * 4
    assert sorted(c.data.tags[names.WORLD_SIZE] for c in children) == ["1", "1", "2", "2"]
    clipped = [c for c in children if c.data.params["train.grad_clip"] != "None"]
    assert len(clipped) == 2 and all(0 < float(c.data.params["train.grad_clip"]) < 2 for c in clipped)
    listed = {a.path for a in client.list_artifacts(run.info.run_id, "probe")}
    assert listed == {"probe/semantics.json", "probe/semantics.md", "probe/semantics_evidence.json"}


def test_the_correct_planted_loop_yields_nothing(store):
    _, client = store
    assert planted_result(client, "none")["findings"] == []


@pytest.mark.parametrize("variant,code,first_step",
                         [(v, *expected) for group, _ in SETTINGS for v, expected in group.items()])
def test_each_planted_wrong_semantics_is_named_with_its_first_step(store, variant, code, first_step):
    _, client = store
    result = planted_result(client, variant)
    assert not result["passed"]
    found = {f["code"]: f for f in result["findings"]}
    assert code in found, f"{variant}: found {sorted(found)}"
    if first_step is not None:
        assert found[code]["first_step"] == first_step, found[code]
    if code.startswith("unexplained"):
        assert found[code]["explained_by"] == []
        assert all(f["code"].startswith("unexplained") for f in result["findings"]), result["findings"]
    else:
        assert found[code]["explained_by"], found[code]
