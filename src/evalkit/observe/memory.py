"""Peak-memory readings over the measured steps (started from the optimizer step post hook of the last warm-up
step, read at the end). Each reading says how it was measured.

CPU: the process's peak RSS (VmHWM) over the measured window; writing 5 to /proc/self/clear_refs
resets the high-water mark at the window's start (Linux). Training memory (`peak_mem_bytes`, what the verdict
judges) is that peak minus the process's RSS after the wrapper was imported and before the task was built
(`import_rss_bytes`, the import footprint, reported apart): model, optimizer state, activations and whatever
the wrapper allocates for training. CUDA: the caching allocator's peak
(`max_memory_allocated` / `max_memory_reserved`) over the window, plus the device memory in use
as NVML reports it.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable

import torch


@dataclass(frozen=True)
class PeakWindow:
    """A started peak-memory window: the resident set size at its start (None when the process's high-water
    mark could not be reset: then peak RSS counts from the process's start) and, on CUDA, NVML's sampler."""

    start_rss: int | None
    nvml: NvmlPeak | None = None


class PeakMemory:
    """The observer's memory window: `start()` when the warm-up ends; `read()` the peaks since (since the
    process's start when the run ended before the warm-up did)."""

    def __init__(self, device: torch.device, import_rss: int | None = None):
        self.device, self.import_rss = device, import_rss
        self.window: PeakWindow | None = None

    def start(self) -> None:
        self.window = reset_peak(self.device)

    def read(self) -> dict:
        return read_peak(self.device, self.window, self.import_rss)


def reset_peak(device: torch.device) -> PeakWindow:
    """Start a peak-memory window: the CUDA allocator's peaks and NVML's sampler (on CUDA), and the process's
    RSS high-water mark."""
    nvml = None
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        nvml = NvmlPeak(device)
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        return PeakWindow(None, nvml)
    rss = _status_kib("VmRSS")
    return PeakWindow(rss * 1024 if rss is not None else None, nvml)


def _status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def current_rss() -> int | None:
    """The process's resident set size now, in bytes (None where /proc is not readable)."""
    rss = _status_kib("VmRSS")
    return rss * 1024 if rss is not None else None


def read_peak(device: torch.device, window: PeakWindow | None, import_rss: int | None = None) -> dict:
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
        out.update(window.nvml.finish() if window is not None and window.nvml is not None else nvml_memory(device))
    elif import_rss is not None and rss is not None:
        out.update({"import_rss_bytes": import_rss, "peak_mem_bytes": max(0, rss * 1024 - import_rss),
                    "peak_mem_method": f"{out['peak_rss_method']} minus VmRSS after the wrapper's imports, before "
                                      "the task was built (training memory; the import footprint apart)"})
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


class PeakSampler:
    """Calls `read()` on a daemon thread every `interval_s` until `stop()`; keeps the largest value."""

    def __init__(self, read: Callable[[], int], interval_s: float):
        self.read, self.interval_s = read, interval_s
        self.peak: int | None = None
        self.samples = 0
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="evalkit-peak-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            try:
                value = int(self.read())
            except Exception as exc:  # noqa: BLE001 - a failing reader ends the sampling, reported by stop()
                self.error = f"{type(exc).__name__}: {exc}"
                return
            self.peak = value if self.peak is None else max(self.peak, value)
            self.samples += 1
            if self._stop.wait(self.interval_s):
                return

    def stop(self) -> int | None:
        self._stop.set()
        self._thread.join(timeout=10)
        return self.peak


class NvmlPeak:
    """The device's memory in use as NVML reports it (every process, every allocator, NCCL's buffers), sampled
    from the window's start until `finish()`: a peak that a wrapper emptying its caches at teardown (Lightning)
    cannot hide."""

    INTERVAL_S = 0.05

    def __init__(self, device: torch.device):
        self.sampler: PeakSampler | None = None
        self.error: str | None = None
        self._result: dict | None = None
        try:
            import pynvml

            pynvml.nvmlInit()
        except Exception as exc:  # noqa: BLE001 - NVML missing or failing is a reading, not an error
            self.error = f"{type(exc).__name__}: {exc}"
            return
        self._pynvml = pynvml
        try:
            handle = _nvml_handle(pynvml, device)
            self.total = int(pynvml.nvmlDeviceGetMemoryInfo(handle).total)
            self.sampler = PeakSampler(lambda: pynvml.nvmlDeviceGetMemoryInfo(handle).used, self.INTERVAL_S)
        except Exception as exc:  # noqa: BLE001
            self.error = f"{type(exc).__name__}: {exc}"
            pynvml.nvmlShutdown()

    def finish(self) -> dict:
        if self._result is None:
            self._result = self._stop()
        return self._result

    def _stop(self) -> dict:
        if self.sampler is None:
            return {"nvml_error": self.error}
        peak = self.sampler.stop()
        self._pynvml.nvmlShutdown()
        if peak is None:
            return {"nvml_error": self.sampler.error or "NVML gave no reading"}
        return {"nvml_used_bytes": peak, "nvml_total_bytes": self.total, "nvml_samples": self.sampler.samples,
                "nvml_method": f"peak of nvmlDeviceGetMemoryInfo.used sampled every {self.INTERVAL_S * 1000:.0f} "
                               "ms from warm-up end to the end of training (whole device)"}
