"""What a number was measured on: the environment lock, the hardware (and whether a job trains on CUDA), the code
version."""
from __future__ import annotations

import os
import platform
import subprocess
import sys
from importlib import metadata

from omegaconf import DictConfig


def environment_lock(first: list[str] = ()) -> str:
    """Every installed distribution and version, pip-freeze style, sorted: the one an import finds, on `first` (a
    wrapper's environment's site-packages) then on this interpreter's path."""
    seen = {}
    for dist in metadata.distributions(path=[*first, *sys.path]):
        name = dist.metadata.get("Name")
        if name:
            seen.setdefault(name.lower(), f"{name}=={dist.version}")
    return "\n".join(seen[k] for k in sorted(seen)) + "\n"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_bytes() -> int | None:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def gpu_description() -> list[dict]:
    """NVIDIA GPUs as NVML sees them; [] when there is no NVIDIA driver (the normal CPU case)."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - NVMLError_LibraryNotFound and friends mean "no NVIDIA GPU"
        return []
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        cuda = pynvml.nvmlSystemGetCudaDriverVersion()
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            gpus.append({"index": i, "name": pynvml.nvmlDeviceGetName(handle),
                         "memory_total_bytes": int(pynvml.nvmlDeviceGetMemoryInfo(handle).total),
                         "driver": driver, "cuda_driver_version": f"{cuda // 1000}.{cuda % 1000 // 10}"})
        return gpus
    finally:
        pynvml.nvmlShutdown()


def hardware_description() -> dict:
    return {"cpu_model": _cpu_model(), "cpu_count": os.cpu_count(),
            "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
            "memory_bytes": _memory_bytes(), "platform": platform.platform(),
            "python": platform.python_version(), "gpus": gpu_description()}


def git_commit(path: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", path, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def runs_on_cuda(cfg: DictConfig) -> bool:
    """Whether the workers will train on CUDA (`hardware=cuda`, or `auto` with a visible device)."""
    return cfg.hardware.device == "cuda" or (cfg.hardware.device == "auto" and cuda_devices() > 0)


def cuda_devices() -> int:
    """The CUDA devices torch sees. torch is imported here, only for a job that may run on CUDA: the
    controller's process otherwise never needs it (the workers import it), and starts a second sooner."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0
