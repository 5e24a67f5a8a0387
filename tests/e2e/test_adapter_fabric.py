"""The Lightning Fabric adapter through the real `evalkit` command, compared with the baseline.

In aligned mode the loop has the baseline's semantics and Fabric owns devices, DDP, precision, clipping
and checkpoints: every step record (loss, LR, gradient norm, data order) and every validation metric equals
the baseline's bit for bit, also with a shorter last accumulation window and after a mid-epoch resume.
"""
from __future__ import annotations

import os

import pytest
from adapter_runs import ADAPTER_SMALL, assert_lightning_ranks_joined, assert_resumed_at_step_21
from helpers import effective_config, job_runs, ok, read_records, run_evalkit

SMALL = ADAPTER_SMALL
TRAINER = "trainer=fabric"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One workdir: the baseline, then Fabric aligned fp32 and bf16_mixed, same overrides."""
    workdir = tmp_path_factory.mktemp("fabric")
    for extra in ([], [TRAINER], [TRAINER, "precision=bf16_mixed"]):
        ok(run_evalkit(workdir, *SMALL, *extra))
    client, (baseline, fp32, bf16) = job_runs(workdir)
    return client, {"baseline": baseline, "fp32": fp32, "bf16_mixed": bf16}


@pytest.mark.parametrize("precision,flag", [("fp32", "32-true"), ("bf16_mixed", "bf16-mixed")])
def test_trains_with_the_baselines_metrics_and_exports_its_effective_config(runs, precision, flag):
    client, by_name = runs
    run, baseline = by_name[precision], by_name["baseline"]
    assert run.info.status == "FINISHED"
    assert run.data.tags["evalkit.trainer"] == "fabric"
    assert set(run.data.metrics) == set(baseline.data.metrics)
    cfg = effective_config(client, run)
    assert run.data.tags["evalkit.version.lightning"] != "not installed" and cfg["monkeypatching"] == "none"
    fabric = cfg["fabric"]
    assert fabric["precision"] == flag and fabric["strategy"] == "SingleDeviceStrategy"
    assert fabric["world_size"] == 1 and fabric["device"] == "cpu"
    explicit = cfg["explicit_settings"]
    assert "use_distributed_sampler=False" in explicit["setup_dataloaders"]
    assert "error_if_nonfinite=False" in explicit["clip_gradients"]
    assert explicit["scheduler"] == "stepped once per optimizer step"
    val = read_records(client, run.info.run_id, "val_rank0.csv")
    assert [r["step"] for r in val] == ["25", "50"] and all(r["samples"] == "128" for r in val)


def test_aligned_fp32_records_equal_the_baselines_bit_for_bit(runs):
    client, by_name = runs
    ours = read_records(client, by_name["fp32"].info.run_id)
    base = read_records(client, by_name["baseline"].info.run_id)
    assert [r["step"] for r in ours] == [r["step"] for r in base] == [str(s) for s in range(1, 51)]
    worst = max(abs(float(a["loss"]) - float(b["loss"])) / abs(float(b["loss"])) for a, b in zip(ours, base))
    assert worst <= 1e-6
    keys = ("loss", "lr", "grad_norm", "micro_batches", "samples", "sched_steps")
    assert [tuple(r[k] for k in keys) for r in ours] == [tuple(r[k] for k in keys) for r in base]
    micro = read_records(client, by_name["fp32"].info.run_id, "micro_rank0.csv")
    base_micro = read_records(client, by_name["baseline"].info.run_id, "micro_rank0.csv")
    assert [m["ids"] for m in micro] == [m["ids"] for m in base_micro]
    val = read_records(client, by_name["fp32"].info.run_id, "val_rank0.csv")
    base_val = read_records(client, by_name["baseline"].info.run_id, "val_rank0.csv")
    assert [r["mse"] for r in val] == [r["mse"] for r in base_val]


def test_bf16_mixed_is_observed_as_bfloat16(runs):
    _, by_name = runs
    tags = by_name["bf16_mixed"].data.tags
    assert tags["evalkit.observed_precision"] == "bfloat16"
    assert "evalkit.precision_mismatch" not in tags


def test_ddp_world_size_two_uses_evalkits_two_processes(workdir):
    ok(run_evalkit(workdir, TRAINER, *SMALL, "distributed=ddp", "distributed.world_size=2"))
    client, (run,) = job_runs(workdir)
    assert run.info.status == "FINISHED" and run.data.tags["evalkit.world_size"] == "2"
    fabric = effective_config(client, run)["fabric"]
    assert fabric["strategy"] == "DDPStrategy" and fabric["world_size"] == 2
    # Lightning's own launcher's variables (issue 43): it joins the ranks evalkit started, spawning none
    assert fabric["cluster_environment"] == "LightningEnvironment" and run.data.tags["evalkit.launch"] == "lightning"
    assert fabric["creates_processes_externally"] is True and fabric["process_group_backend"] == "gloo"
    assert_lightning_ranks_joined(client, run)


def test_resume_through_fabric_load_continues_at_step_21(workdir):
    common = [TRAINER, "task.n_train=512", "task.n_val=128", "train.val_every=25", "train.max_steps=40"]
    ok(run_evalkit(workdir, *common, "train.ckpt_every=20"))
    client, (continuous,) = job_runs(workdir)
    ckpt_dir = continuous.data.tags["evalkit.checkpoint_dir"]
    assert sorted(os.listdir(ckpt_dir)) == ["step_00000020.ckpt", "step_00000040.ckpt"]
    ok(run_evalkit(workdir, *common, f"resume_from={os.path.join(ckpt_dir, 'step_00000020.ckpt')}"))
    _, (_, resumed) = job_runs(workdir)
    assert resumed.info.status == "FINISHED"
    full, rest = assert_resumed_at_step_21(client, continuous, resumed)
    assert len(rest) == 20
    keys = ("loss", "lr", "grad_norm")
    assert [tuple(r[k] for k in keys) for r in rest] == [tuple(full[r["step"]][k] for k in keys) for r in rest]
    val = read_records(client, resumed.info.run_id, "val_rank0.csv")
    assert [r["step"] for r in val] == ["25", "40"]
    cfg = effective_config(client, resumed)
    assert cfg["resumed_from"].endswith("step_00000020.ckpt") and cfg["start_step"] == 20


def test_gradient_accumulation_records_two_micro_batches_per_step(workdir):
    ok(run_evalkit(workdir, TRAINER, *SMALL, "train.grad_accum=2"))
    client, (run,) = job_runs(workdir)
    steps = read_records(client, run.info.run_id)
    assert len(steps) == 50
    assert all(r["micro_batches"] == "2" and r["samples"] == "64" for r in steps)


def test_aligned_refuses_fp16_on_cpu(workdir):
    proc = run_evalkit(workdir, TRAINER, *SMALL, "precision=fp16_mixed")
    assert proc.returncode != 0
    _, (run,) = job_runs(workdir)
    assert run.info.status == "FAILED"
    reason = run.data.tags["evalkit.failure_reason"]
    assert reason.startswith("UnsupportedCombination:") and "16-mixed" in reason


def test_defaults_mode_runs_the_quick_start_and_the_observers_see_what_it_did(workdir):
    """Quick-start code: fp16 on CPU silently becomes bf16; with 16 batches an epoch and grad_accum=3 the
    accumulation page's `iteration % 3 != 0` steps on each epoch's first batch alone (steps 1 and 7), then every
    3 batches."""
    ok(run_evalkit(workdir, TRAINER, "trainer.mode=defaults", "task.n_train=512", "task.n_val=128",
                   "train.max_steps=8", "train.val_every=4", "train.grad_accum=3", "precision=fp16_mixed"))
    client, (run,) = job_runs(workdir)
    assert run.info.status == "FINISHED"
    assert run.data.tags["evalkit.observed_precision"] == "bfloat16"
    assert "fp16_mixed" in run.data.tags["evalkit.precision_mismatch"]
    assert [r["micro_batches"] for r in read_records(client, run.info.run_id)] == \
           ["1", "3", "3", "3", "3", "3", "1", "3"]
    cfg = effective_config(client, run)
    assert "explicit_settings" not in cfg and cfg["fabric"]["precision"] == "bf16-mixed"
    assert sorted(os.listdir(workdir)) == ["mlflow.db", "mlruns", "outputs"]
