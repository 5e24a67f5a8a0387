"""The CUDA path. CI has no GPU: these skip cleanly there, and `hardware=cuda` is refused with a reason."""
from __future__ import annotations

import json

import pytest
import torch
from helpers import job_runs, run_evalkit

from evalkit.trainers import bundled_trainers

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device visible")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
def test_cuda_requested_without_a_gpu_is_refused_with_a_reason(workdir):
    proc = run_evalkit(workdir, "hardware=cuda", "train.max_steps=2")
    assert proc.returncode != 0
    _, (run,) = job_runs(workdir)
    assert run.info.status == "FAILED"
    assert "no CUDA device" in run.data.tags["evalkit.failure_reason"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks hardware=auto on a machine without CUDA")
def test_auto_hardware_without_a_gpu_trains_every_rank_on_the_cpu(workdir):
    proc = run_evalkit(workdir, "hardware=auto", "distributed=ddp", "distributed.world_size=2",
                       "train.max_steps=3", "task.n_train=256", "task.n_val=64")
    assert proc.returncode == 0, proc.stderr[-3000:]
    client, (run,) = job_runs(workdir)
    for rank in (0, 1):
        summary = json.load(open(client.download_artifacts(run.info.run_id, f"evalkit/summary_rank{rank}.json")))
        assert summary["device"] == "cpu" and "nvml_used_bytes" not in summary


TRAINERS = sorted(bundled_trainers(), key=lambda name: name != "baseline")     # the baseline first


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("trainer", TRAINERS)
@pytest.mark.parametrize("precision,dtype", [("fp32", "float32"), ("bf16_mixed", "bfloat16"),
                                             ("fp16_mixed", "float16")])
def test_cuda_records_precision_and_device_memory(workdir, trainer, precision, dtype):
    proc = run_evalkit(workdir, f"trainer={trainer}", "hardware=cuda", f"precision={precision}",
                       "train.max_steps=30")
    assert proc.returncode == 0, proc.stderr
    client, (run,) = job_runs(workdir)
    assert run.data.tags["evalkit.observed_precision"] == dtype
    assert "max_memory_allocated" in run.data.tags["evalkit.peak_mem_method"]
    summary = json.load(open(client.download_artifacts(run.info.run_id, "evalkit/summary_rank0.json")))
    assert summary["device"] == "cuda:0"
    assert summary["nvml_samples"] >= 1, summary.get("nvml_error")
    assert summary["nvml_used_bytes"] >= run.data.metrics["perf/peak_mem_bytes"] > 0   # the driver sees more
    assert run.data.metrics["perf/nvml_peak_used_bytes"] == summary["nvml_used_bytes"]
    assert summary["unattributed_samples"] == 0
    if precision == "fp16_mixed":
        assert "train/loss_scale" in run.data.metrics


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("trainer", TRAINERS[1:])
@pytest.mark.parametrize("precision,dtype", [("bf16_mixed", "bfloat16"), ("fp16_mixed", "float16")])
def test_cuda_defaults_mode_runs_or_says_why(workdir, trainer, precision, dtype):
    """Quick-start code on a GPU: it finishes (another precision than requested is tagged as a mismatch) or
    ends FAILED with its reason (e.g. Fabric's clip_gradients on an fp16 overflow); never silently."""
    run_evalkit(workdir, f"trainer={trainer}", "trainer.mode=defaults", "hardware=cuda", f"precision={precision}",
                "train.max_steps=30", "train.grad_clip=null")
    _, (run,) = job_runs(workdir)
    tags = run.data.tags
    if run.info.status != "FINISHED":
        assert run.info.status == "FAILED" and tags["evalkit.failure_reason"]
        return
    if tags["evalkit.observed_precision"] != dtype:
        assert precision in tags["evalkit.precision_mismatch"]


@pytest.mark.cuda
@pytest.mark.skipif(torch.cuda.device_count() != 1, reason="checks the refusal on a machine with one GPU")
@pytest.mark.parametrize("hardware", ["cuda", "auto"])
def test_more_ranks_than_gpus_is_refused_before_launch(workdir, hardware):
    proc = run_evalkit(workdir, f"hardware={hardware}", "distributed=ddp", "distributed.world_size=2",
                       "train.max_steps=2")
    assert proc.returncode != 0
    _, (run,) = job_runs(workdir)
    assert "one CUDA device per rank" in run.data.tags["evalkit.failure_reason"]


@pytest.mark.cuda
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices for NCCL DDP")
@pytest.mark.parametrize("trainer", TRAINERS)
def test_cuda_ddp_with_nccl(workdir, trainer):
    proc = run_evalkit(workdir, f"trainer={trainer}", "hardware=cuda", "distributed=ddp",
                       "distributed.world_size=2", "train.max_steps=20")
    assert proc.returncode == 0, proc.stderr
