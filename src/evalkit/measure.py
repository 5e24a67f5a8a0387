"""Peak-memory readings. Each reading says how it was measured.

CPU: the process's peak RSS (VmHWM) over the measured window; writing 5 to /proc/self/clear_refs
resets the high-water mark at the window's start (Linux). CUDA: the caching allocator's peak
(`max_memory_allocated` / `max_memory_reserved`) over the window, plus the device memory in use
as NVML reports it.
"""
from __future__ import annotations

import torch


def reset_peak(device: torch.device) -> int | None:
    """Start a peak-memory window. Returns the resident set size at the start (CPU; 0 on CUDA), or None
    when the high-water mark could not be reset."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return 0
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        return None
    rss = _status_kib("VmRSS")
    return rss * 1024 if rss is not None else 0


def _status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def read_peak(device: torch.device, window_start_rss: int | None) -> dict:
    """The window's peaks. On CPU also the growth over the RSS at the window's start: peak RSS includes
    everything imported (a wrapper's modules), the growth is what training itself added."""
    rss = _status_kib("VmHWM")
    window_reset = window_start_rss is not None
    out = {
        "peak_rss_bytes": rss * 1024 if rss is not None else None,
        "peak_rss_method": "VmHWM since clear_refs at warm-up end" if window_reset else "VmHWM since start",
    }
    if window_start_rss and rss is not None:
        out["window_start_rss_bytes"] = window_start_rss
        out["peak_rss_growth_bytes"] = rss * 1024 - window_start_rss
    if device.type == "cuda":
        out.update({
            "peak_mem_bytes": torch.cuda.max_memory_allocated(device),
            "peak_reserved_bytes": torch.cuda.max_memory_reserved(device),
            "peak_mem_method": "torch.cuda.max_memory_allocated since warm-up end",
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
            uuid = str(torch.cuda.get_device_properties(device).uuid)
            try:
                handle = pynvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
            except pynvml.NVMLError:
                handle = pynvml.nvmlDeviceGetHandleByIndex(device.index or 0)
            info = pynvml.nvmlDeviceGetMemoryInfo(handle)
            return {"nvml_used_bytes": int(info.used), "nvml_total_bytes": int(info.total),
                    "nvml_method": "nvmlDeviceGetMemoryInfo.used at the end of training (whole device)"}
        finally:
            pynvml.nvmlShutdown()
    except Exception as exc:  # noqa: BLE001 - NVML missing or failing is a reading, not an error
        return {"nvml_error": f"{type(exc).__name__}: {exc}"}
