"""Every installed trainer in one sweep into one store (the session's shared sweep, conftest's `shared_sweep`):
each run FINISHED, one vocabulary of metric names for all, the effective-config artifact, and in aligned mode
(fp32, one process) every wrapper's loss, LR, gradient norm, micro-batches and validation equal the baseline's
bit for bit. Each adapter's bf16_mixed, two-process, resume and defaults runs are checked in its own
tests/e2e/test_adapter_<wrapper>.py."""
from __future__ import annotations

import json

import pytest
from adapter_runs import assert_bit_identical_to_baseline

from evalkit.trainers import bundled_trainers


def test_every_installed_trainer_ran_and_records_one_vocabulary_of_metrics(shared_sweep):
    client, jobs = shared_sweep.runs()
    assert "baseline" in jobs and len(jobs) >= 2, "no wrapper installed: pip install -e '.[all]'"
    failed = {name: r.data.tags.get("evalkit.failure_reason") for name, r in jobs.items()
              if r.info.status != "FINISHED"}
    assert not failed, failed
    names = {frozenset(k for k in r.data.metrics if not k.startswith("perf/peak_mem_bytes_rank"))
             for r in jobs.values()}
    assert len(names) == 1, names                      # one vocabulary of metrics for every wrapper
    expected = {"train/loss", "train/lr", "train/grad_norm", "val/mse", "val/loss", "perf/samples_per_s"}
    assert expected <= set(next(iter(names)))
    parents = {r.data.tags.get("mlflow.parentRunId") for r in jobs.values()}
    assert len(parents) == 1 and None not in parents   # one sweep: one parent run
    for name, run in jobs.items():
        with open(client.download_artifacts(run.info.run_id, "evalkit/effective_config.json")) as fh:
            assert json.load(fh), name
        assert run.data.tags["evalkit.observed_precision"] == "float32", name


def test_the_sweep_holds_every_bundled_trainer_that_is_installed(shared_sweep):
    """Nothing is left out quietly: a bundled trainer is either in the sweep or not installed here."""
    from evalkit.trainers import installed_trainers

    ready, missing = installed_trainers()
    assert set(shared_sweep.trainers) == set(ready) and set(ready) | set(missing) == set(bundled_trainers())


@pytest.mark.parametrize("trainer", [name for name in bundled_trainers() if name != "baseline"])
def test_each_aligned_wrapper_equals_the_baseline_bit_for_bit(shared_sweep, trainer):
    if trainer not in shared_sweep.trainers:
        pytest.skip(f"{trainer} is not installed: pip install -e '.[all]'")
    client, wrapper, baseline = shared_sweep.aligned(trainer)
    assert_bit_identical_to_baseline(client, wrapper, baseline, steps=50, val_steps=["25", "50"])
