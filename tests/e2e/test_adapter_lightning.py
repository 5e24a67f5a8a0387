"""The Lightning Trainer adapter through the real `evalkit` command, compared with the baseline.

What holds bit for bit in aligned mode (fp32, one process, no accumulation): the loss, LR and gradient
norm of every optimizer step, the data order, the validation metrics, and a resume from a mid-epoch
checkpoint. (Lightning runs the step's forward/backward inside `optimizer.step(closure)`; evalkit reads
the gradient norm in the optimizer's post-step hook, so the closure does not shift it.)
"""
from __future__ import annotations

import os

import pytest
from adapter_runs import ADAPTER_SMALL, assert_lightning_ranks_joined, assert_resumed_at_step_21
from helpers import effective_config, job_runs, ok, read_records, run_evalkit

SMALL = ADAPTER_SMALL
TRAINER = "trainer=lightning"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One workdir: the baseline, then Lightning aligned fp32 and bf16_mixed, same overrides."""
    workdir = tmp_path_factory.mktemp("lightning")
    for extra in ([], [TRAINER], [TRAINER, "precision=bf16_mixed"]):
        ok(run_evalkit(workdir, *SMALL, *extra))
    client, (baseline, fp32, bf16) = job_runs(workdir)
    return client, {"baseline": baseline, "fp32": fp32, "bf16_mixed": bf16}


@pytest.mark.parametrize("precision,flag", [("fp32", "32-true"), ("bf16_mixed", "bf16-mixed")])
def test_trains_with_the_baselines_metrics_and_exports_its_effective_config(runs, precision, flag):
    client, by_name = runs
    run, baseline = by_name[precision], by_name["baseline"]
    assert run.info.status == "FINISHED"
    assert run.data.tags["evalkit.trainer"] == "lightning"
    assert set(run.data.metrics) == set(baseline.data.metrics)
    cfg = effective_config(client, run)
    trainer = cfg["trainer"]
    assert run.data.tags["evalkit.version.lightning"] != "not installed"     # conf/trainer/lightning.yaml
    assert trainer["precision"] == flag and trainer["max_steps"] == 50 and trainer["global_step"] == 50
    assert trainer["accumulate_grad_batches"] == 1 and trainer["gradient_clip_val"] == 1.0
    assert trainer["gradient_clip_algorithm"] == "norm" and trainer["num_sanity_val_steps"] == 0
    assert trainer["val_check_batch"] == 25 and trainer["check_val_every_n_epoch"] is None
    assert trainer["lr_scheduler_configs"] == [{"interval": "step", "frequency": 1, "scheduler": "LambdaLR"}]
    assert trainer["train_sampler"] == "OrderedSampler"
    explicit = cfg["explicit_settings"]
    assert explicit["use_distributed_sampler"] is False and explicit["inference_mode"] is False
    assert explicit["max_steps"] == 50 and explicit["precision"] == flag and explicit["logger"] is False
    assert cfg["monkeypatching"] == "none"
    val = read_records(client, run.info.run_id, "val_rank0.csv")
    assert [r["step"] for r in val] == ["25", "50"] and all(r["samples"] == "128" for r in val)


def test_aligned_fp32_loss_curve_equals_the_baselines(runs):
    client, by_name = runs
    ours = read_records(client, by_name["fp32"].info.run_id)
    base = read_records(client, by_name["baseline"].info.run_id)
    assert [r["step"] for r in ours] == [r["step"] for r in base] == [str(s) for s in range(1, 51)]
    worst = max(abs(float(a["loss"]) - float(b["loss"])) / abs(float(b["loss"])) for a, b in zip(ours, base))
    assert worst <= 1e-6
    # It is in fact bit for bit (the CSV holds repr-exact floats): loss, LR, data order, validation.
    assert [(r["loss"], r["lr"], r["micro_batches"]) for r in ours] == \
           [(r["loss"], r["lr"], r["micro_batches"]) for r in base]
    micro = read_records(client, by_name["fp32"].info.run_id, "micro_rank0.csv")
    base_micro = read_records(client, by_name["baseline"].info.run_id, "micro_rank0.csv")
    assert [m["ids"] for m in micro] == [m["ids"] for m in base_micro]
    val = read_records(client, by_name["fp32"].info.run_id, "val_rank0.csv")
    base_val = read_records(client, by_name["baseline"].info.run_id, "val_rank0.csv")
    assert [r["mse"] for r in val] == [r["mse"] for r in base_val]
    assert [r["grad_norm"] for r in ours] == [r["grad_norm"] for r in base]


def test_bf16_mixed_is_observed_as_bfloat16(runs):
    _, by_name = runs
    tags = by_name["bf16_mixed"].data.tags
    assert tags["evalkit.observed_precision"] == "bfloat16"
    assert "evalkit.precision_mismatch" not in tags


def test_ddp_world_size_two_uses_evalkits_two_processes(workdir):
    ok(run_evalkit(workdir, TRAINER, *SMALL, "distributed=ddp", "distributed.world_size=2"))
    client, (run,) = job_runs(workdir)
    assert run.info.status == "FINISHED" and run.data.tags["evalkit.world_size"] == "2"
    trainer = effective_config(client, run)["trainer"]
    assert trainer["strategy"] == "DDPStrategy" and trainer["world_size"] == 2 and trainer["num_nodes"] == 1
    # Lightning's own launcher's variables (issue 43): it joins the ranks evalkit started, spawning none
    assert trainer["cluster_environment"] == "LightningEnvironment" and run.data.tags["evalkit.launch"] == "lightning"
    assert trainer["creates_processes_externally"] is True and trainer["process_group_backend"] == "gloo"
    assert_lightning_ranks_joined(client, run)


def test_resume_through_ckpt_path_continues_at_step_21(workdir):
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
    # Lightning restores model, optimizer, scheduler and loops; the resumable DataLoader restores the data
    # position mid-epoch (step 20 is batch 4 of epoch 1): the rest of the run is bit for bit the same.
    assert [(r["loss"], r["lr"]) for r in rest] == [(full[r["step"]]["loss"], full[r["step"]]["lr"]) for r in rest]
    val = read_records(client, resumed.info.run_id, "val_rank0.csv")
    assert [r["step"] for r in val] == ["25", "40"]
    cfg = effective_config(client, resumed)
    assert cfg["resumed_from"].endswith("step_00000020.ckpt") and cfg["trainer"]["start_step"] == 20


def test_gradient_accumulation_records_two_micro_batches_per_step(workdir):
    ok(run_evalkit(workdir, TRAINER, *SMALL, "train.grad_accum=2"))
    client, (run,) = job_runs(workdir)
    steps = read_records(client, run.info.run_id)
    assert len(steps) == 50
    assert all(r["micro_batches"] == "2" and r["samples"] == "64" for r in steps)
    assert effective_config(client, run)["trainer"]["accumulate_grad_batches"] == 2


def test_aligned_refuses_fp16_on_cpu(workdir):
    proc = run_evalkit(workdir, TRAINER, *SMALL, "precision=fp16_mixed")
    assert proc.returncode != 0
    _, (run,) = job_runs(workdir)
    assert run.info.status == "FAILED"
    reason = run.data.tags["evalkit.failure_reason"]
    assert reason.startswith("UnsupportedCombination:") and "16-mixed" in reason


def test_defaults_mode_runs_the_quick_start_and_the_observers_see_what_it_did(workdir):
    """Quick-start code: fp16 on CPU silently becomes bf16, the scheduler steps once per epoch (16 batches),
    Lightning's sanity check validates before training, and its output stays under the run directory."""
    ok(run_evalkit(workdir, TRAINER, "trainer.mode=defaults", "task.n_train=512", "task.n_val=128",
                   "train.max_steps=20", "train.val_every=10", "precision=fp16_mixed"))
    client, (run,) = job_runs(workdir)
    assert run.info.status == "FINISHED"
    assert run.data.tags["evalkit.observed_precision"] == "bfloat16"
    assert "fp16_mixed" in run.data.tags["evalkit.precision_mismatch"]
    lrs = [r["lr"] for r in read_records(client, run.info.run_id)]
    assert len(set(lrs[:16])) == 1 and lrs[16] != lrs[15]
    assert [r["step"] for r in read_records(client, run.info.run_id, "val_rank0.csv")] == ["0", "10", "20"]
    cfg = effective_config(client, run)
    assert "explicit_settings" not in cfg and cfg["trainer"]["lr_scheduler_configs"][0]["interval"] == "epoch"
    assert cfg["trainer"]["default_root_dir"].startswith(run.data.tags["evalkit.run_dir"])
    assert sorted(os.listdir(workdir)) == ["mlflow.db", "mlruns", "outputs"]
