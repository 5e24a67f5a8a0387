"""The token caliber live (issue 33): the transformers Trainer's aligned mode passes it `compute_loss_func` with the
window's token count; Fabric's and Ignite's aligned loops weight each micro-batch by its tokens over the window's;
Accelerate's runs its accumulation guide's variable-size skeleton; Poutyne is handed each micro-batch's tokens as the
batch size its `batches_per_step` weighs by. The semantic probe finds no loss normalization of their own in any
(before, each averaged micro-batch means: `loss_norm.micro_mean`)."""
from __future__ import annotations

import json

import pytest
from helpers import ok, run_evalkit, store_uri

from evalkit import names
from evalkit.probes.semantics.plan import tokens_job_name


def _probe(workdir, trainer: str, *overrides: str) -> tuple[dict, list[dict]]:
    """The semantic probe on `trainer` with the token job: its result and its jobs' evidence."""
    ok(run_evalkit(workdir, "probe=semantics", f"trainer={trainer}", "probe.tokens=true", *overrides, timeout=600))
    from mlflow.tracking import MlflowClient

    client = MlflowClient(store_uri(workdir))
    exp = client.get_experiment_by_name("evalkit").experiment_id
    (run,) = client.search_runs([exp], f"tags.`{names.ROLE}` = 'probe'")
    with open(client.download_artifacts(run.info.run_id, "probe/semantics.json")) as fh:
        result = json.load(fh)
    with open(client.download_artifacts(run.info.run_id, "probe/semantics_evidence.json")) as fh:
        return result, json.load(fh)


def test_the_trainer_aligned_takes_the_token_mean_over_the_window(tmp_path):
    pytest.importorskip("transformers")
    result, jobs = _probe(tmp_path, "hf_trainer", "probe.world_sizes=[1]", "probe.clip=[false]")
    assert [f["code"] for f in result["findings"] if f["code"].startswith("loss_norm")] == []
    tokens = [j["effective"] for j in jobs if j["config"]["task"]["name"] == "tiny_lm"]
    assert tokens and all(e["compute_loss_func"] == "TokenWindowLoss" for e in tokens)
    assert all(e["training_arguments"]["average_tokens_across_devices"] for e in tokens)
    assert result["passed"]


def test_fabric_aligned_takes_the_token_mean_over_the_window(tmp_path):
    pytest.importorskip("lightning")
    result, jobs = _probe(tmp_path, "fabric")     # the token jobs at world sizes 1 and 2, the probe's others too
    assert [f["code"] for f in result["findings"]] == [] and result["passed"]
    assert sorted(j["name"] for j in jobs if j["config"]["task"]["name"] == "tiny_lm") == ["ws1-tokens", "ws2-tokens"]


@pytest.mark.parametrize("trainer, module, world_size", [("accelerate", "accelerate", 2), ("ignite", "ignite", 2),
                                                        ("poutyne", "poutyne", 1)])
def test_the_other_aligned_loops_take_the_token_mean_over_the_window(tmp_path, trainer, module, world_size):
    """At world size 2 the token job's window spans the ranks (tokens summed over both); Poutyne runs one process."""
    pytest.importorskip(module)
    result, jobs = _probe(tmp_path, trainer, f"probe.world_sizes=[{world_size}]", "probe.clip=[false]")
    assert [f["code"] for f in result["findings"] if f["code"].startswith("loss_norm")] == []
    tokens = [j for j in jobs if j["config"]["task"]["name"] == "tiny_lm"]
    assert [j["name"] for j in tokens] == [tokens_job_name(world_size)]
    assert all("loss_norm" not in [d["code"] for d in j["effective"]["deviations"]] for j in tokens)
