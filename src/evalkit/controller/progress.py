"""What long commands show while they work, on stderr: one progress line per job (step, loss, time left),
rewritten in place on a terminal (`live`), printed every `tracking.progress_interval_s` elsewhere (`plain`: CI,
a pipe, a log file), or nothing but results and problems (`quiet`). `tracking.progress=auto` picks live on a
terminal and plain otherwise (and under CI)."""
from __future__ import annotations

import logging
import os
import sys
import time

MODES = ("auto", "live", "plain", "quiet")
POSITION_ENV = "EVALKIT_SWEEP_POSITION"     # "4/18": the job of a sweep being run, set by the sweep for its jobs
LIVE_EVERY_S = 0.5                          # a live line is rewritten at most this often


def resolve(mode: str, stream=None) -> str:
    """live | plain | quiet for `mode`: auto is live only on an interactive terminal outside CI."""
    if mode != "auto":
        return mode
    stream = stream or sys.stderr
    interactive = getattr(stream, "isatty", lambda: False)() and os.environ.get("TERM", "") != "dumb"
    return "live" if interactive and not os.environ.get("CI") else "plain"


def hush_libraries(mode: str) -> None:
    """Quiet: MLflow's own notices too ("Creating initial MLflow database tables...")."""
    if mode == "quiet":
        logging.getLogger("mlflow").setLevel(logging.WARNING)


def say(mode: str, text: str) -> None:
    """A progress message (not a result, not a problem): silent when quiet."""
    if resolve(mode) != "quiet":
        print(text, file=sys.stderr, flush=True)


def time_left(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


class JobProgress:
    """One job's progress line. `update` as records arrive, `end` once with how the job ended."""

    def __init__(self, mode: str, label: str, max_steps: int, interval_s: float, stream=None):
        self.stream = stream or sys.stderr
        self.mode = resolve(mode, self.stream)
        self.label, self.max_steps, self.interval_s = label, max_steps, interval_s
        position = os.environ.get(POSITION_ENV)
        self.prefix = f"[evalkit] job {position}: " if position else "[evalkit] "
        self.started = time.monotonic()
        self._first: tuple[float, int] | None = None    # (time, step) of the first step seen: the rate's origin
        self._last_print = self.started if self.mode == "plain" else 0.0
        self._open = False                              # a live line is on screen without its newline

    def text(self, step: int | None, loss: float | None, now: float) -> str:
        elapsed = now - self.started
        if step is None:
            return f"{self.prefix}{self.label}: starting, {elapsed:.0f} s"
        if self._first is None or step < self._first[1]:
            self._first = (now, step)
        where = f"step {step}/{self.max_steps}" + (f" loss {loss:.4g}" if loss is not None else "")
        left = ""
        first_t, first_step = self._first
        if step > first_step and step < self.max_steps:
            left = f", about {time_left((now - first_t) / (step - first_step) * (self.max_steps - step))} left"
        return f"{self.prefix}{self.label}: {where}, {elapsed:.0f} s{left}"

    def update(self, step: int | None, loss: float | None, note: str = "") -> None:
        now = time.monotonic()
        line = self.text(step, loss, now) + note
        if self.mode == "live" and now - self._last_print >= LIVE_EVERY_S:
            self.stream.write("\r\x1b[K" + line)
            self.stream.flush()
            self._open, self._last_print = True, now
        elif self.mode == "plain" and now - self._last_print >= self.interval_s:
            print(line, file=self.stream, flush=True)
            self._last_print = now

    def end(self, outcome: str) -> None:
        """Close the line with the job's end (live: in place; plain: one more line; quiet: nothing)."""
        if self.mode == "quiet":
            return
        line = f"{self.prefix}{self.label}: {outcome} in {time.monotonic() - self.started:.0f} s"
        self.stream.write(("\r\x1b[K" if self._open else "") + line + "\n")
        self.stream.flush()
        self._open = False
