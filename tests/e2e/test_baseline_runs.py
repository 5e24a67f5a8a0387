"""The baseline through the real command: exact resume, DDP with gloo, every task, a corrupt checkpoint."""
from __future__ import annotations

import glob
import os

import pytest
from helpers import job_runs, read_records, run_evalkit

SMALL = ["task.n_train=512", "task.n_val=128", "train.val_every=10"]


def test_resume_in_a_fresh_process_reproduces_the_continuous_run_bit_for_bit(workdir):
    proc = run_evalkit(workdir, *SMALL, "train.max_steps=30", "train.ckpt_every=10", "train.grad_accum=3")
    assert proc.returncode == 0, proc.stderr
    client, (continuous,) = job_runs(workdir)
    ckpt = os.path.join(continuous.data.tags["evalkit.checkpoint_dir"], "step_00000010.pt")
    assert os.path.exists(ckpt)
    proc = run_evalkit(workdir, *SMALL, "train.max_steps=30", "train.grad_accum=3", f"resume_from={ckpt}")
    assert proc.returncode == 0, proc.stderr
    _, (_, resumed) = job_runs(workdir)
    full = {r["step"]: r for r in read_records(client, continuous.info.run_id)}
    rest = read_records(client, resumed.info.run_id)
    assert [r["step"] for r in rest] == [str(s) for s in range(11, 31)]
    for row in rest:   # the CSV holds repr-exact floats: string equality is bit equality
        assert (row["loss"], row["lr"], row["grad_norm"]) == \
               (full[row["step"]]["loss"], full[row["step"]]["lr"], full[row["step"]]["grad_norm"]), row["step"]
    val_full = {r["step"]: r["mse"] for r in read_records(client, continuous.info.run_id, "val_rank0.csv")}
    val_rest = read_records(client, resumed.info.run_id, "val_rank0.csv")
    assert [r["step"] for r in val_rest] == ["20", "30"]
    assert all(r["mse"] == val_full[r["step"]] for r in val_rest)


def test_ddp_trains_with_two_gloo_processes_and_logs_both_ranks_memory(workdir):
    proc = run_evalkit(workdir, *SMALL, "train.max_steps=20", "distributed=ddp", "distributed.world_size=2")
    assert proc.returncode == 0, proc.stderr
    client, (run,) = job_runs(workdir)
    assert run.info.status == "FINISHED"
    assert {"perf/peak_mem_bytes_rank0", "perf/peak_mem_bytes_rank1", "perf/peak_mem_bytes"} <= set(run.data.metrics)
    steps = read_records(client, run.info.run_id)
    assert len(steps) == 20 and all(r["samples"] == "32" for r in steps)    # rank 0's share of each step
    val = read_records(client, run.info.run_id, "val_rank0.csv")
    assert all(r["ranks"] == "2" and r["samples"] == "128" for r in val)     # merged over both ranks
    effective = client.download_artifacts(run.info.run_id, "evalkit/effective_config.json")
    assert '"ddp": true' in open(effective).read()
    assert len(glob.glob(os.path.join(run.data.tags["evalkit.run_dir"], "worker_rank*.log"))) == 2


@pytest.mark.parametrize("task,metric", [("cnn_classification", "val/accuracy"), ("tiny_lm", "val/perplexity")])
def test_other_tasks_train(workdir, task, metric):
    proc = run_evalkit(workdir, f"task={task}", "task.n_train=256", "task.n_val=64", "train.max_steps=12",
                       "train.val_every=6")
    assert proc.returncode == 0, proc.stderr
    client, (run,) = job_runs(workdir)
    assert run.info.status == "FINISHED" and metric in run.data.metrics
    assert run.data.tags["evalkit.val_metric"] == metric.split("/")[1]
    assert len(client.get_metric_history(run.info.run_id, "train/loss")) == 12


def test_corrupt_checkpoint_fails_the_run_with_one_clear_reason(workdir):
    bad = workdir / "step_00000005.pt"
    bad.write_bytes(b"not a checkpoint")
    proc = run_evalkit(workdir, *SMALL, "train.max_steps=10", f"resume_from={bad}")
    assert proc.returncode != 0
    _, (run,) = job_runs(workdir)
    assert run.info.status == "FAILED"
    reason = run.data.tags["evalkit.failure_reason"]
    assert "cannot be read" in reason and str(bad) in reason and "resume" in reason
