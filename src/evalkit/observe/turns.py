"""Taking turns: a timed job that shares its cores with its comparison's other jobs, one block of steps at a time.

The performance probe keeps the baseline and the wrapper alive at once and lets them run in turns, so
that the two arms of a comparison are timed at the same moment of the machine, seconds apart instead of minutes.
Each rank of such a job talks to the controller's turn table (`evalkit.controller.turns`) over a Unix socket named
in its job spec, one line per message, and never runs while another job's block runs:

- after its warm-up steps it pins every thread to the timed CPUs (`names.CPUS_AT_TURN_ENV`: it started on all of
  them, beside the job started with it), says `ready <median warm-up step seconds>` and waits;
- `go <k>` lets it run k optimizer steps; it then says `done <seconds>` (perf_counter from `go` to the end of the
  k-th step, the observer's own per-step work included, as in every arm alike; on CUDA after a synchronize) and
  waits again;
- `stop` ends its training: `TimedWindowDone` is raised from the optimizer step hook; the worker records the job
  as finished (the window it was asked to time is complete), whatever the wrapper had left to do.

The block times are kept in the job's summary (`turns`), the only place the judge reads them from.
"""
from __future__ import annotations

import os
import socket
import statistics
import time
from typing import Any

import torch

from evalkit import names


def pin_every_thread(cpus: str | None) -> None:
    """Pin every thread of this process to `cpus` ("1" or "2,3"; None: leave them): a job taking turns starts on
    every CPU (its start-up beside another job's, each on a core of its own) and is timed on the CPUs every other
    job is timed on."""
    if not cpus or not hasattr(os, "sched_setaffinity"):
        return
    chosen = {int(c) for c in cpus.split(",")}
    for tid in os.listdir("/proc/self/task") if os.path.isdir("/proc/self/task") else ["0"]:
        try:
            os.sched_setaffinity(int(tid), chosen)
        except OSError:       # a thread that ended meanwhile
            pass


class TimedWindowDone(BaseException):
    """The turn table has every block it needs: training ends here. A BaseException, so that a wrapper's own
    `except Exception` (a callback's error handling) cannot swallow it; wrappers that catch BaseException to clean
    up re-raise it."""


class Turns:
    """One rank's side of the turn table (see the module's docstring)."""

    def __init__(self, address: str, job: str, rank: int, warmup_steps: int, device: torch.device,
                 timeout_s: float = 600.0):
        self.job, self.rank, self.warmup_steps, self.device = job, rank, warmup_steps, device
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(timeout_s)          # a turn table that never answers ends the job, not hangs it
        self._sock.connect(address)
        self._reader = self._sock.makefile("r", encoding="ascii")
        self._send(f"hello {job} {rank}")
        self._warmup: list[float] = []            # the warm-up steps' seconds
        self._block_steps = 0                     # steps per block (0: not in a block)
        self._left = 0                            # steps left in the running block
        self._started = 0.0                       # perf_counter at `go`
        self.blocks: list[float] = []             # seconds of each block, in order

    def _send(self, line: str) -> None:
        self._sock.sendall((line + "\n").encode("ascii"))

    def _wait(self) -> None:
        """Block until the turn table says go (start a block) or stop (raise TimedWindowDone)."""
        line = self._reader.readline().split()
        if not line or line[0] == "stop":
            raise TimedWindowDone("the turn table stopped the timed window" if line else
                                  "the turn table closed its connection")
        if line[0] != "go":
            raise RuntimeError(f"the turn table said {' '.join(line)!r}, expected 'go <steps>' or 'stop'")
        self._block_steps = self._left = int(line[1])
        self._synchronize()
        self._started = time.perf_counter()

    def _synchronize(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def after_step(self, step: int, seconds: float) -> None:
        """Called by the observer at the end of every optimizer step (`step`: steps completed, `seconds`: its
        interval): waits for a turn after the warm-up and after every block."""
        if not self._block_steps:
            self._warmup.append(seconds)
            if step >= self.warmup_steps:
                pin_every_thread(os.environ.get(names.CPUS_AT_TURN_ENV))
                self._send(f"ready {statistics.median(self._warmup[-max(1, self.warmup_steps):]):.9f}")
                self._wait()
            return
        self._left -= 1
        if self._left > 0:
            return
        self._synchronize()
        elapsed = time.perf_counter() - self._started
        self.blocks.append(elapsed)
        self._send(f"done {elapsed:.9f}")
        self._wait()

    def summary(self) -> dict[str, Any]:
        return {"turns": {"steps_per_block": self._block_steps, "blocks_s": self.blocks,
                          "warmup_step_s": statistics.median(self._warmup) if self._warmup else None}}

    def close(self) -> None:
        for closing in (self._reader, self._sock):
            try:
                closing.close()
            except OSError:
                pass
