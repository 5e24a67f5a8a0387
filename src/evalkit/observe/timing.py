"""Step clocks and the run's throughput (global optimizer step post hook).

Each optimizer step's interval runs from the end of the observer's work on the previous step to the start
of its work on this one (`perf_counter`), so the observers' own cost is left out. On CUDA a timing event is
also recorded at each step's end and read once, at `throughput`: the CPU clock would only time the queueing
of work. Throughput counts the steps after the warm-up steps (from the first step this process took) and
leaves out intervals in which validation ran.
"""
from __future__ import annotations

import time
from typing import Any

import torch


class StepClock:
    def __init__(self, device: torch.device, warmup_steps: int):
        self.device, self.warmup_steps = device, warmup_steps
        self._cuda = device.type == "cuda"
        self._t_prev = time.perf_counter()
        self._cuda_events: list[Any] = []
        self._intervals: list[tuple[int, float, int, bool]] = []   # (step, seconds, samples, validation ran)

    def lap(self) -> tuple[float, float]:
        """A step ended: now (perf_counter) and the seconds since `restart` (a CUDA event recorded on CUDA)."""
        now = time.perf_counter()
        if self._cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record(torch.cuda.current_stream(self.device))
            self._cuda_events.append(event)
        return now, now - self._t_prev

    def add(self, step: int, seconds: float, samples: int, validated: bool) -> None:
        self._intervals.append((step, seconds, samples, validated))

    def restart(self) -> None:
        """The observer's work on a step is done: the next interval starts now."""
        self._t_prev = time.perf_counter()

    def first_measured_step(self, step: int) -> int:
        """The first step after the warm-up (`step`: the steps completed, used before any interval is in)."""
        return (self._intervals[0][0] if self._intervals else step) + self.warmup_steps

    def throughput(self, step: int) -> dict[str, Any]:
        intervals = self._intervals
        if self._cuda and len(self._cuda_events) > 1:
            torch.cuda.synchronize(self.device)
            gpu = [a.elapsed_time(b) / 1000 for a, b in zip(self._cuda_events, self._cuda_events[1:])]
            intervals = [(s, t, n, v) for (s, _, n, v), t in zip(intervals[1:], gpu)]
        first = self.first_measured_step(step)
        window = [(t, n) for s, t, n, validated in intervals if s >= first and not validated]
        method = "CUDA events between optimizer steps" if self._cuda else "perf_counter between optimizer steps"
        if not window:
            return {"throughput_method": method, "window_steps": 0}
        seconds = sum(t for t, _ in window)
        times = sorted(t for t, _ in window)
        return {"samples_per_s": sum(n for _, n in window) / seconds, "steps_per_s": len(window) / seconds,
                "step_time_median_s": times[len(times) // 2], "window_steps": len(window),
                "throughput_method": f"{method}, steps after {self.warmup_steps} warm-up steps, "
                                     "intervals that ran validation excluded"}
