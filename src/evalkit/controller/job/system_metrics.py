"""MLflow's system metrics (CPU, memory; GPU where NVML answers), sampled by a thread of the controller, never
of the training process, and logged with the job's other records under MLflow's own names (`system/...`), so
its UI shows them in its "System metrics" section.

Samples wait in memory until the controller ships (a store that fails keeps them for the next try); a
controller that is killed loses the samples not yet shipped: they describe the machine, not the training.
"""
from __future__ import annotations

import threading
import time

from mlflow.entities import Metric

PREFIX = "system/"


def _monitors() -> list:
    from mlflow.system_metrics.metrics.cpu_monitor import CPUMonitor

    monitors = [CPUMonitor()]
    try:
        from mlflow.system_metrics.metrics.gpu_monitor import GPUMonitor

        monitors.append(GPUMonitor())    # raises without an NVIDIA GPU and driver
    except Exception:  # noqa: BLE001 - no GPU: CPU and memory only
        pass
    return monitors


class SystemSampler:
    """Sample every `interval_s` seconds from start() to stop(); `take()` hands over what was sampled."""

    def __init__(self, interval_s: float):
        self.interval_s = interval_s
        self._pending: list[Metric] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._step = 0

    def start(self) -> "SystemSampler":
        if self.interval_s > 0:
            import psutil

            psutil.cpu_percent()      # the first reading only starts psutil's interval: it is always 0
            self._monitors = _monitors()
            self._thread = threading.Thread(target=self._loop, name="evalkit-system-metrics", daemon=True)
            self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval_s)

    def sample(self) -> None:
        values: dict[str, float] = {}
        for monitor in self._monitors:
            try:
                monitor.collect_metrics()
                values.update(monitor.aggregate_metrics())
                monitor.clear_metrics()
            except Exception:  # noqa: BLE001 - a monitor that stops answering (a GPU gone) is left out
                continue
        now = int(time.time() * 1000)
        with self._lock:
            self._pending += [Metric(PREFIX + k, float(v), now, self._step) for k, v in values.items()]
            self._step += 1

    def take(self) -> list[Metric]:
        with self._lock:
            taken, self._pending = self._pending, []
        return taken

    def put_back(self, points: list[Metric]) -> None:
        """Points a failed write did not store, kept for the next try."""
        with self._lock:
            self._pending = points + self._pending

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
