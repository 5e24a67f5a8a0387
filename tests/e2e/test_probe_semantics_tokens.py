"""The token caliber on the transformers Trainer (issue 33), live: aligned mode passes it `compute_loss_func` with
the window's token count, and the semantic probe finds no loss normalization of its own (before it, the Trainer
averaged micro-batch means: `loss_norm.micro_mean`)."""
from __future__ import annotations

import json

import pytest
from helpers import ok, run_evalkit, store_uri

from evalkit import names

pytest.importorskip("transformers")


def test_the_trainer_aligned_takes_the_token_mean_over_the_window(tmp_path):
    ok(run_evalkit(tmp_path, "probe=semantics", "trainer=hf_trainer", "probe.tokens=true", "probe.world_sizes=[1]",
                   "probe.clip=[false]", timeout=600))
    from mlflow.tracking import MlflowClient

    client = MlflowClient(store_uri(tmp_path))
    exp = client.get_experiment_by_name("evalkit").experiment_id
    (run,) = client.search_runs([exp], f"tags.`{names.ROLE}` = 'probe'")
    with open(client.download_artifacts(run.info.run_id, "probe/semantics.json")) as fh:
        result = json.load(fh)
    with open(client.download_artifacts(run.info.run_id, "probe/semantics_evidence.json")) as fh:
        jobs = json.load(fh)
    assert [f["code"] for f in result["findings"] if f["code"].startswith("loss_norm")] == []
    tokens = [j["effective"] for j in jobs if j["config"]["task"]["name"] == "tiny_lm"]
    assert tokens and all(e["compute_loss_func"] == "TokenWindowLoss" for e in tokens)
    assert all(e["training_arguments"]["average_tokens_across_devices"] for e in tokens)
    assert result["passed"]
