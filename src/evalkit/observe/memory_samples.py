"""Memory sampled through a run (`observe.memory_every`): the stability probe's leak check reads its slope.

Every `every` optimizer steps: the process's RSS, on CUDA the allocator's allocated bytes and NVML's used bytes,
and the bytes of the files the job wrote outside evalkit's own (`log_bytes`: the wrapper's logs and console
output under the job's directory, checkpoints and evalkit's spool excluded). One `memory` record each.
"""
from __future__ import annotations

import fnmatch
import os

import torch

from evalkit import names
from evalkit.observe.memory import current_rss
from evalkit.spool import SpoolWriter

EVALKIT_DIRS = (names.SPOOL_DIR, names.CHECKPOINTS_DIR, names.RECORDS_DIR)


def log_bytes(job_dir: str | None) -> int | None:
    """Bytes of every file under `job_dir` but evalkit's own directories (the worker logs count: they hold the
    wrapper's console output)."""
    if not job_dir or not os.path.isdir(job_dir):
        return None
    total = 0
    for root, dirs, files in os.walk(job_dir):
        if root == job_dir:
            dirs[:] = [d for d in dirs if d not in EVALKIT_DIRS]
            files = [f for f in files if fnmatch.fnmatch(f, names.WORKER_LOG_GLOB)]
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass
    return total


class MemorySamples:
    def __init__(self, spool: SpoolWriter, device: torch.device, every: int, job_dir: str | None):
        self.spool, self.device, self.every, self.job_dir = spool, device, every, job_dir

    def record(self, step: int) -> None:
        if not self.every or step % self.every:
            return
        row = {"kind": "memory", "step": step, "rss": current_rss(), "log_bytes": log_bytes(self.job_dir)}
        if self.device.type == "cuda":
            row["cuda_allocated"] = torch.cuda.memory_allocated(self.device)
            row["nvml_used"] = _nvml_used(self.device)
        self.spool.add(row)


def _nvml_used(device: torch.device) -> int | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(device.index or 0)
        return int(pynvml.nvmlDeviceGetMemoryInfo(handle).used)
    except Exception:  # noqa: BLE001 - NVML absent or refusing: the allocator's figure remains
        return None
