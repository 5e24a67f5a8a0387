"""Peak-memory readings. Each reading says how it was measured.

CPU: the process's peak RSS (VmHWM) over the measured window; writing 5 to /proc/self/clear_refs
resets the high-water mark at the window's start (Linux). CUDA: the caching allocator's peak
(`max_memory_allocated` / `max_memory_reserved`) over the window, plus the device memory in use
as NVML reports it.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class PeakWindow:
    """A started peak-memory window: the resident set size at its start, None when the process's
    high-water mark could not be reset (then peak RSS counts from the process's start)."""

    start_rss: int | None


def reset_peak(device: torch.device) -> PeakWindow:
    """Start a peak-memory window: the CUDA allocator's peaks (on CUDA) and the process's RSS high-water mark."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        return PeakWindow(None)
    rss = _status_kib("VmRSS")
    return PeakWindow(rss * 1024 if rss is not None else None)


def _status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def read_peak(device: torch.device, window: PeakWindow | None) -> dict:
    """The window's peaks (since the process started when no window was started). On CPU also the growth
    over the RSS at the window's start: peak RSS includes everything imported (a wrapper's modules), the
    growth is what training itself added."""
    rss = _status_kib("VmHWM")
    rss_reset = window is not None and window.start_rss is not None
    out = {
        "peak_rss_bytes": rss * 1024 if rss is not None else None,
        "peak_rss_method": "VmHWM since clear_refs at warm-up end" if rss_reset else "VmHWM since start",
    }
    if rss_reset and rss is not None:
        out["window_start_rss_bytes"] = window.start_rss
        out["peak_rss_growth_bytes"] = rss * 1024 - window.start_rss
    if device.type == "cuda":
        since = "warm-up end" if window is not None else "start (the run ended before warm-up did)"
        out.update({
            "peak_mem_bytes": torch.cuda.max_memory_allocated(device),
            "peak_reserved_bytes": torch.cuda.max_memory_reserved(device),
            "peak_mem_method": f"torch.cuda.max_memory_allocated since {since}",
        })
        out.update(nvml_memory(device))
    else:
        out.update({"peak_mem_bytes": out["peak_rss_bytes"], "peak_mem_method": out["peak_rss_method"]})
    return out


def nvml_memory(device: torch.device) -> dict:
    """Device memory in use according to NVML (the driver's view: every process, every allocator).

    The device is matched by UUID, since CUDA and NVML may number devices differently."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            info = pynvml.nvmlDeviceGetMemoryInfo(_nvml_handle(pynvml, device))
            return {"nvml_used_bytes": int(info.used), "nvml_total_bytes": int(info.total),
                    "nvml_method": "nvmlDeviceGetMemoryInfo.used at the end of training (whole device)"}
        finally:
            pynvml.nvmlShutdown()
    except Exception as exc:  # noqa: BLE001 - NVML missing or failing is a reading, not an error
        return {"nvml_error": f"{type(exc).__name__}: {exc}"}


def _nvml_handle(pynvml, device: torch.device):
    """NVML's handle of `device`, found by UUID: NVML numbers GPUs physically, ignoring CUDA_VISIBLE_DEVICES,
    so an index would be a guess. A MIG slice's UUID carries "MIG-" where a GPU's carries "GPU-"."""
    uuid = str(torch.cuda.get_device_properties(device).uuid)
    candidates = [uuid] if uuid.startswith(("GPU-", "MIG-")) else [f"GPU-{uuid}", f"MIG-{uuid}"]
    for candidate in candidates:
        try:
            return pynvml.nvmlDeviceGetHandleByUUID(candidate)
        except pynvml.NVMLError:
            continue
    raise LookupError(f"NVML knows no device with UUID {uuid} (tried {', '.join(candidates)})")
