"""The Ignite adapter through the real `evalkit` command.

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

pytest.importorskip("ignite")

TRAINER = ["trainer=ignite"]
SMALL, RESUME = ADAPTER_SMALL, ADAPTER_RESUME


@pytest.fixture(scope="module")
def aligned(shared_sweep):
    """The wrapper's and the baseline's runs of the session's shared sweep (ADAPTER_SMALL, aligned fp32)."""
    return shared_sweep.aligned("ignite")


@pytest.fixture(scope="module")
def bf16(adapter_runs):
    """The contract's bf16 run (tests/e2e/test_adapters.py), shared: its effective config is checked here."""
    return adapter_runs("ignite").bf16()


@pytest.fixture(scope="module")
def ddp(adapter_runs):
    """The contract's world-size-2 run and its resume from step 20, shared."""
    return adapter_runs("ignite").ddp()


def test_fp32_finishes_with_the_baselines_metrics_and_the_effective_config(aligned):
    client, wrapper, baseline = aligned
    assert wrapper.info.status == "FINISHED"
    assert set(wrapper.data.metrics) == set(baseline.data.metrics)
    eff = effective_config(client, wrapper)
    assert eff["wrapper"] == "pytorch-ignite" and eff["mode"] == "aligned"
    assert eff["final_state"]["iteration"] == 50 and eff["final_state"]["epoch_length"] == 16
    assert [h["handler"] for h in eff["attached_handlers"]] == ["step_scheduler", "run_validation", "Checkpoint"]
    assert all(h["registered"] for h in eff["attached_handlers"])
    assert [v["step"] for v in eff["ignite_validation"]] == [25, 50]        # Ignite's own Loss metric
    assert eff["explicit_settings"]["loss_division"] == "by the window's actual size"


def test_bf16_runs_in_bfloat16_with_two_micro_batches_per_step(aligned, bf16):
    client, run = bf16
    _, _, baseline = aligned
    assert run.info.status == "FINISHED"
    assert set(run.data.metrics) == set(baseline.data.metrics)
    assert run.data.tags["evalkit.observed_precision"] == "bfloat16"
    assert "evalkit.precision_mismatch" not in run.data.tags
    steps = read_records(client, run.info.run_id)
    assert len(steps) == 50 and all(r["micro_batches"] == "2" and r["samples"] == "64" for r in steps)
    assert effective_config(client, run)["final_state"]["epoch_length"] == 8      # 16 micro-batches in windows of 2


def test_world_size_two_finishes(ddp):
    client, continuous, _, _ = ddp
    assert continuous.info.status == "FINISHED"
    eff = effective_config(client, continuous)
    assert eff["idist"]["backend"] == "gloo" and eff["idist"]["world_size"] == 2
    assert eff["model_wrapper"] == "DistributedDataParallel"
    val = read_records(client, continuous.info.run_id, "val_rank0.csv")
    assert all(r["ranks"] == "2" and r["samples"] == "128" for r in val)


def test_resume_through_checkpoint_load_objects_continues_the_run(ddp):
    client, continuous, resumed, checkpoint = ddp
    assert os.path.isfile(checkpoint)
    assert resumed.info.status == "FINISHED"
    full, rest = assert_resumed_at_step_21(client, continuous, resumed)
    # Model, optimizer, scheduler, RNG and the data position all come back: the rest of the curve is exact.
    assert [(r["loss"], r["lr"]) for r in rest] == [(full[r["step"]]["loss"], full[r["step"]]["lr"]) for r in rest]
    assert effective_config(client, resumed)["resumed_from"] == os.path.abspath(checkpoint)


def test_defaults_mode_runs_the_quick_start_even_where_it_cannot_clip(tmp_path):
    """Defaults mode runs what users run: the quick start has no clipping, so the job trains unclipped and the
    adapter's report says so (the semantic probe shows what that changes); refusing is aligned mode's."""
    proc = run_evalkit(tmp_path, *TRAINER, "trainer.mode=defaults", "task.n_train=256", "task.n_val=64",
                       "train.max_steps=5", "train.grad_clip=0.5")
    assert proc.returncode == 0, proc.stderr[-2000:]
    client, (run,) = job_runs(tmp_path)
    assert run.info.status == "FINISHED"
    report = effective_config(client, run)
    assert report["deviations"][0] == {"code": "clip.not_applied", "text": "defaults: create_supervised_trainer "
                                       "(quick start) has no gradient clipping: train.grad_clip is not applied"}
    assert report["grad_clip"] == 0.5
