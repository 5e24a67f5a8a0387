"""Every adapter in one sweep: each run FINISHED, with one vocabulary of metric names for all and the
effective-config artifact. (Each adapter's bf16_mixed and two-process runs are checked in its own
tests/test_adapter_<wrapper>.py.)"""
from __future__ import annotations

import json

import pytest
from helpers import job_runs, run_evalkit

pytestmark = pytest.mark.e2e
TRAINERS = ["baseline", "lightning", "fabric", "accelerate", "hf_trainer", "ignite"]
SMALL = ["task.n_train=256", "task.n_val=64", "train.max_steps=10", "train.val_every=5"]


def _check(workdir, expected: int) -> None:
    client, runs = job_runs(workdir)
    jobs = [r for r in runs if r.data.tags.get("evalkit.role") == "job"]
    assert len(jobs) == expected
    failed = {r.info.run_name: r.data.tags.get("evalkit.failure_reason") for r in jobs if r.info.status != "FINISHED"}
    assert not failed, failed
    names = {frozenset(k for k in r.data.metrics if not k.startswith("perf/peak_mem_bytes_rank")) for r in jobs}
    assert len(names) == 1, names                      # one vocabulary of metrics for every wrapper
    expected = {"train/loss", "train/lr", "train/grad_norm", "val/mse", "val/loss", "perf/samples_per_s"}
    assert expected <= set(next(iter(names)))
    for run in jobs:
        effective = json.load(open(client.download_artifacts(run.info.run_id, "evalkit/effective_config.json")))
        assert effective, run.info.run_name
        assert run.data.tags["evalkit.observed_precision"] == "float32", run.info.run_name


def test_every_adapter_records_one_vocabulary_of_metrics(workdir):
    proc = run_evalkit(workdir, f"trainer={','.join(TRAINERS)}", *SMALL, multirun=True, timeout=1500)
    assert proc.returncode == 0, proc.stderr[-3000:]
    _check(workdir, len(TRAINERS))
