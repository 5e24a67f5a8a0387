"""The Accelerate adapter through the real `evalkit` command.

Runs shared by the assertions (module scope, small task):
- `aligned`: aligned fp32 at world size 1 and the baseline, read from the session's shared sweep (their
  records equal bit for bit: tests/smoke/test_matrix.py);
- `bf16` and `ddp`: the adapter contract's runs (tests/e2e/test_adapters.py: bf16_mixed with grad_accum=2;
  world size 2, then resumed from its step-20 checkpoint), trained once per session and shared.
"""
from __future__ import annotations

import os

import pytest
from adapter_runs import (
    ADAPTER_RESUME,
    ADAPTER_SMALL,
    assert_resumed_at_step_21,
)
from helpers import effective_config, job_runs, read_records, run_evalkit

pytest.importorskip("accelerate")

TRAINER = ["trainer=accelerate"]
SMALL, RESUME = ADAPTER_SMALL, ADAPTER_RESUME


@pytest.fixture(scope="module")
def aligned(shared_sweep):
    """The wrapper's and the baseline's runs of the session's shared sweep (ADAPTER_SMALL, aligned fp32)."""
    return shared_sweep.aligned("accelerate")


@pytest.fixture(scope="module")
def bf16(adapter_runs):
    """The contract's bf16 run (tests/e2e/test_adapters.py), shared: its effective config is checked here."""
    return adapter_runs("accelerate").bf16()


@pytest.fixture(scope="module")
def ddp(adapter_runs):
    """The contract's world-size-2 run and its resume from step 20, shared."""
    return adapter_runs("accelerate").ddp()


def test_fp32_finishes_with_the_baselines_metrics_and_the_effective_config(aligned):
    client, wrapper, baseline = aligned
    assert wrapper.info.status == "FINISHED"
    assert set(wrapper.data.metrics) == set(baseline.data.metrics)
    eff = effective_config(client, wrapper)
    assert eff["wrapper"] == "accelerate" and eff["mode"] == "aligned"
    assert eff["mixed_precision"] == "no" and eff["gradient_accumulation_steps"] == 1
    # one process under `accelerate launch --cpu`: no one-process DDP (issue 43)
    assert eff["distributed_type"] == "DistributedType.NO" and eff["num_processes"] == 1
    settings = eff["explicit_settings"]
    assert settings["step_scheduler_with_optimizer"] is False
    assert settings["dataloader_config"]["use_seedable_sampler"] is False
    assert settings["gradient_accumulation_plugin"]["sync_with_dataloader"] is True
    assert wrapper.data.tags["evalkit.wrapper_version"] == eff["version"]


def test_bf16_runs_in_bfloat16_with_two_micro_batches_per_step(aligned, bf16):
    client, run = bf16
    _, _, baseline = aligned
    assert run.info.status == "FINISHED"
    assert set(run.data.metrics) == set(baseline.data.metrics)
    assert run.data.tags["evalkit.observed_precision"] == "bfloat16"
    assert "evalkit.precision_mismatch" not in run.data.tags
    steps = read_records(client, run.info.run_id)
    assert len(steps) == 50 and all(r["micro_batches"] == "2" and r["samples"] == "64" for r in steps)
    eff = effective_config(client, run)
    assert eff["mixed_precision"] == "bf16" and eff["native_amp"] is True
    assert eff["gradient_accumulation_steps"] == 2


def test_world_size_two_finishes(ddp):
    client, continuous, _, _ = ddp
    assert continuous.info.status == "FINISHED"
    eff = effective_config(client, continuous)
    assert eff["num_processes"] == 2 and eff["backend"] == "gloo" and eff["model_wrapper"] == "DistributedDataParallel"
    val = read_records(client, continuous.info.run_id, "val_rank0.csv")
    assert all(r["ranks"] == "2" and r["samples"] == "128" for r in val)


def test_resume_through_save_state_continues_the_run(ddp):
    client, continuous, resumed, state_dir = ddp
    expected = {"evalkit_position.json", "model.safetensors", "optimizer.bin", "scheduler.bin", "random_states_0.pkl"}
    assert expected <= set(os.listdir(state_dir))
    assert resumed.info.status == "FINISHED"
    full, rest = assert_resumed_at_step_21(client, continuous, resumed)
    # Model, optimizer, scheduler, RNG and data position all come back: the rest of the curve is exact.
    assert [(r["loss"], r["lr"]) for r in rest] == [(full[r["step"]]["loss"], full[r["step"]]["lr"]) for r in rest]
    assert effective_config(client, resumed)["resumed_from"] == os.path.abspath(state_dir)


def test_fp16_on_cpu_is_refused_in_aligned_mode(tmp_path):
    proc = run_evalkit(tmp_path, *TRAINER, "task.n_train=256", "task.n_val=64", "train.max_steps=5",
                       "precision=fp16_mixed")
    assert proc.returncode != 0
    _, (run,) = job_runs(tmp_path)
    assert run.info.status == "FAILED"
    assert run.data.tags["evalkit.failure_reason"].startswith("UnsupportedCombination: accelerate does not autocast")
