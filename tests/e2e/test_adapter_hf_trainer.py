"""The transformers Trainer adapter through the real `evalkit` command.

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

pytest.importorskip("transformers")
pytest.importorskip("accelerate")

TRAINER = ["trainer=hf_trainer"]
SMALL, RESUME = ADAPTER_SMALL, ADAPTER_RESUME


@pytest.fixture(scope="module")
def aligned(shared_sweep):
    """The wrapper's and the baseline's runs of the session's shared sweep (ADAPTER_SMALL, aligned fp32)."""
    return shared_sweep.aligned("hf_trainer")


@pytest.fixture(scope="module")
def bf16(adapter_runs):
    """The contract's bf16 run (tests/e2e/test_adapters.py), shared: its effective config is checked here."""
    return adapter_runs("hf_trainer").bf16()


@pytest.fixture(scope="module")
def ddp(adapter_runs):
    """The contract's world-size-2 run and its resume from step 20, shared."""
    return adapter_runs("hf_trainer").ddp()


def test_fp32_finishes_with_the_baselines_metrics_and_the_effective_config(aligned):
    client, wrapper, baseline = aligned
    assert wrapper.info.status == "FINISHED"
    assert set(wrapper.data.metrics) == set(baseline.data.metrics)
    eff = effective_config(client, wrapper)
    assert eff["wrapper"] == "transformers.Trainer" and eff["mode"] == "aligned"
    args = eff["training_arguments"]
    assert args["max_steps"] == 50 and args["eval_steps"] == 25
    assert args["report_to"] in ("none", [], ["none"])      # transformers 5 normalises "none" to []
    assert args["output_dir"] == wrapper.data.tags["evalkit.checkpoint_dir"]
    assert eff["overridden_methods"] == ["get_train_dataloader", "get_eval_dataloader"]
    assert eff["explicit_settings"]["ddp_find_unused_parameters"] is False
    assert eff["hf_hub_offline"] == "1"
    assert any("eval_loss" in entry for entry in eff["trainer_state"]["log_history"])   # the Trainer's own eval


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
    assert eff["training_arguments"]["bf16"] is True and eff["accelerator"]["mixed_precision"] == "bf16"
    assert eff["training_arguments"]["gradient_accumulation_steps"] == 2


def test_world_size_two_finishes(ddp):
    client, continuous, _, _ = ddp
    assert continuous.info.status == "FINISHED"
    eff = effective_config(client, continuous)
    assert eff["world_size"] == 2 and eff["accelerator"]["num_processes"] == 2
    val = read_records(client, continuous.info.run_id, "val_rank0.csv")
    assert all(r["ranks"] == "2" and r["samples"] == "128" for r in val)


def test_resume_from_checkpoint_continues_the_run(ddp):
    client, continuous, resumed, checkpoint = ddp
    assert {"trainer_state.json", "model.safetensors", "optimizer.pt", "scheduler.pt"} <= set(os.listdir(checkpoint))
    assert resumed.info.status == "FINISHED"
    full, rest = assert_resumed_at_step_21(client, continuous, resumed)
    # Model, optimizer, scheduler, RNG and the skipped batches all come back: the rest of the curve is exact.
    assert [(r["loss"], r["lr"]) for r in rest] == [(full[r["step"]]["loss"], full[r["step"]]["lr"]) for r in rest]
    eff = effective_config(client, resumed)
    assert eff["resumed_from"] == os.path.abspath(checkpoint) and eff["start_step"] == 20


def test_fp16_on_cpu_is_refused_in_aligned_mode(tmp_path):
    proc = run_evalkit(tmp_path, *TRAINER, "task.n_train=256", "task.n_val=64", "train.max_steps=5",
                       "precision=fp16_mixed")
    assert proc.returncode != 0
    _, (run,) = job_runs(tmp_path)
    assert run.info.status == "FAILED"
    assert run.data.tags["evalkit.failure_reason"].startswith(
        "UnsupportedCombination: transformers Trainer does not autocast")
