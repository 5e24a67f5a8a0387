"""Validation merged over ranks as the wrapper's documented evaluation scores it (issue 43): two ranks' observers
score a padded validation set (rank 1 repeats two of rank 0's samples, as a distributed sampler evens out the ranks);
the merge counts the repeats, and scores each sample once where the wrapper de-duplicates (gather_for_metrics)."""
from __future__ import annotations

import json

import torch

from evalkit.controller.job.shipper import merge_validation
from evalkit.observe.observer import Observer, ObserveSettings
from evalkit.spool import SpoolWriter
from evalkit.tasks.catalog import mlp_regression

SHARDS = [list(range(0, 8)), list(range(8, 16)) + [0, 1]]     # rank 1 padded with samples 0 and 1


def validation_records(tmp_path, per_sample: bool) -> list[dict]:
    task = mlp_regression(0, n_train=32, n_val=16, in_dim=4, hidden=8, depth=2, out_dim=1, noise=0.1)
    records = []
    for rank, ids in enumerate(SHARDS):
        folder = tmp_path / f"{per_sample}"
        observer = Observer(task, SpoolWriter(str(folder), rank), torch.device("cpu"), ObserveSettings(warmup_steps=0,
                            per_sample_validation=per_sample)).attach()
        with torch.no_grad():
            task.model.eval()
            for batch in (ids[:5], ids[5:]):
                task.model(task.val_set.tensors[0][batch])
        observer.finish()
        observer.detach()
        lines = (folder / f"records_rank{rank}.jsonl").read_text().splitlines()
        records += [r for r in map(json.loads, lines) if r["kind"] == "val"]
    return records, task


def mse(task, ids: list[int]) -> float:
    with torch.no_grad():
        x, y = task.val_set.tensors
        return float(((task.model(x[ids]) - y[ids]) ** 2).mean())


def test_repeated_validation_samples_are_counted_and_scored_once_where_the_wrapper_gathers_for_metrics(tmp_path):
    records, task = validation_records(tmp_path, per_sample=True)
    every = merge_validation(records)
    once = merge_validation(records, dedup=True)
    assert every["repeated"] == once["repeated"] == 2
    assert every["count"] == 18 and abs(every["value"] - mse(task, SHARDS[0] + SHARDS[1])) < 1e-6
    assert once["count"] == 16 and once["deduplicated"] is True
    assert abs(once["value"] - mse(task, list(range(16)))) < 1e-6
    assert abs(once["loss"] - mse(task, list(range(16)))) < 1e-6
    assert every["value"] != once["value"]


def test_one_rank_records_no_per_sample_sums_and_the_merge_is_the_plain_sum(tmp_path):
    records, task = validation_records(tmp_path, per_sample=False)
    merged = merge_validation(records, dedup=True)
    assert "repeated" not in merged and "deduplicated" not in merged
    assert merged["count"] == 18 and abs(merged["value"] - mse(task, SHARDS[0] + SHARDS[1])) < 1e-6
