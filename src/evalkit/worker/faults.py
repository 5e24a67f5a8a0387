"""Faults a worker injects into its own process, at an optimizer step, for the stability and functional probes.

Each fault goes through a public torch hook or function, never a wrapper's internals, and counts optimizer steps
as the observer does (`Observer.step`):
- `kill_after_step=N`: SIGKILL at the first training forward after step N, i.e. after everything the wrapper does
  once step N ends (its validation, its checkpoint of step N); the observer's records are flushed first, so the
  spool holds steps 1..N as a real process's flushed records would;
- `kill_in_save_after_step=N`: SIGKILL halfway through the first `torch.save` after step N: half of the serialized
  bytes reach the destination (a path or an open file), then the process dies. A wrapper that writes to a
  temporary file and renames it loses only that file; one that writes in place leaves a truncated checkpoint. A
  wrapper that serializes into memory first (Lightning, Fabric: `torch.save` into a buffer, then one write) is
  killed halfway through its next write of a file under the checkpoint directory or the temporary directory
  (where fsspec's transactions stage a file before moving it into place) instead (`open` watched until then);
- `oom_at_step=k`: torch.OutOfMemoryError raised by a model forward hook in the first training forward of step k;
- `loss_error_at_step=k`: a RuntimeError raised by a forward pre hook of the task's loss module during step k;
- `disk_full_at_step=k`: from the first training forward of step k the spool's device is full: the write of step
  k's records lands half, then fails with ENOSPC (`SpoolWriter.fill_device`);
- `slow_forward_s=t`: a sleep of t seconds in every training forward: a job slow enough for what happens around it
  (a tracking server that stops and returns) to happen while it trains.
"""
from __future__ import annotations

import builtins
import io
import os
import signal
import sys
import tempfile
import time
from typing import Any, Callable

import torch

INJECTED = "injected by evalkit"


class FaultInjector:
    def __init__(self, faults: Any, model: torch.nn.Module, loss_fn: torch.nn.Module, step: Callable[[], int],
                 flush: Callable[[], None], ckpt_dir: str | None = None,
                 fill_device: Callable[[], None] | None = None):
        self.faults, self.step, self.flush, self.fill_device = faults, step, flush, fill_device
        self.ckpt_dir = os.path.realpath(ckpt_dir) if ckpt_dir else None
        self._handles: list = []
        self._original_save = None
        self._original_open = None
        if faults.kill_after_step or faults.oom_at_step or faults.disk_full_at_step or faults.slow_forward_s:
            self._handles.append(model.register_forward_pre_hook(self._on_forward_pre))
        if faults.oom_at_step:
            self._handles.append(model.register_forward_hook(self._on_forward))
        if faults.loss_error_at_step:
            self._handles.append(loss_fn.register_forward_pre_hook(self._on_loss_pre))
        if faults.kill_in_save_after_step:
            self._original_save = torch.save
            torch.save = self._save       # the public function wrappers call (`torch.save(obj, f)`)

    @property
    def active(self) -> bool:
        return bool(self._handles or self._original_save)

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []
        if self._original_save is not None:
            torch.save = self._original_save
            self._original_save = None
        if self._original_open is not None:
            builtins.open = self._original_open
            self._original_open = None

    # ------------------------------------------------------------------ the faults
    def _kill(self, what: str) -> None:
        self.flush()
        print(f"[evalkit] fault {INJECTED}: SIGKILL {what}", file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)

    def _on_forward_pre(self, module, args) -> None:
        if self.faults.slow_forward_s and torch.is_grad_enabled():
            time.sleep(self.faults.slow_forward_s)
        after = self.faults.kill_after_step
        if after and torch.is_grad_enabled() and self.step() >= after:
            self._kill(f"after optimizer step {self.step()}")
        full = self.faults.disk_full_at_step
        if full and self.fill_device and torch.is_grad_enabled() and self.step() == full - 1:
            print(f"[evalkit] fault {INJECTED}: the spool's device is full from step {full}", file=sys.stderr,
                  flush=True)
            self.fill_device()
            self.fill_device = None

    def _on_forward(self, module, args, output) -> None:
        at = self.faults.oom_at_step
        if at and torch.is_grad_enabled() and self.step() == at - 1:
            raise torch.OutOfMemoryError(f"out of memory ({INJECTED} in the model's forward at optimizer step {at})")

    def _on_loss_pre(self, module, args) -> None:
        at = self.faults.loss_error_at_step
        if at and torch.is_grad_enabled() and self.step() == at - 1:
            raise RuntimeError(f"error in the loss function ({INJECTED} at optimizer step {at})")

    def _save(self, obj, f, *args, **kwargs):
        if self.step() < self.faults.kill_in_save_after_step:
            return self._original_save(obj, f, *args, **kwargs)
        if not isinstance(f, (str, os.PathLike)) and isinstance(f, io.BytesIO) and self.ckpt_dir:
            self._original_save(obj, f, *args, **kwargs)      # into memory: the kill waits for the file's write
            self._watch_open()
            return None
        buffer = io.BytesIO()
        self._original_save(obj, buffer, *args, **kwargs)
        data = buffer.getvalue()[: len(buffer.getvalue()) // 2]
        if isinstance(f, (str, os.PathLike)):
            with open(f, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            where = os.fspath(f)
        else:
            f.write(data)
            if hasattr(f, "flush"):
                f.flush()
            where = getattr(f, "name", type(f).__name__)
        self._kill(f"halfway through torch.save to {where} ({len(data)} bytes written) after optimizer step "
                   f"{self.step()}")

    def stages_checkpoint(self, path: str) -> bool:
        """Where a checkpoint serialized into memory is written: under its directory, or a file right in the
        temporary directory, where fsspec's transactions (Lightning's `_atomic_save`) stage it before moving it
        into place (a run directory below the temporary directory is not that)."""
        return bool(path) and (path.startswith(os.path.join(self.ckpt_dir, "")) or
                               os.path.dirname(path) == os.path.realpath(tempfile.gettempdir()))

    def _watch_open(self) -> None:
        """Until the kill: a file opened for writing under the checkpoint directory gets half of its first write."""
        if self._original_open is not None:
            return
        original = self._original_open = builtins.open
        injector = self

        def watched_open(file, mode="r", *args, **kwargs):
            handle = original(file, mode, *args, **kwargs)
            path = os.path.realpath(os.fspath(file)) if isinstance(file, (str, os.PathLike)) else ""
            if any(m in mode for m in "wax") and injector.stages_checkpoint(path):
                return _HalfWrite(handle, path, injector)
            return handle

        builtins.open = watched_open


class _HalfWrite:
    """A file opened for writing whose first write stops halfway: the bytes reach the disk, then SIGKILL."""

    def __init__(self, handle, path: str, injector: FaultInjector):
        self._handle, self._path, self._injector = handle, path, injector

    def write(self, data):
        half = data[: len(data) // 2]
        self._handle.write(half)
        self._handle.flush()
        os.fsync(self._handle.fileno())
        self._injector._kill(f"halfway through writing {self._path} ({len(half)} of {len(data)} bytes) after "
                             f"optimizer step {self._injector.step()}")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._handle.close()

    def __getattr__(self, name):
        return getattr(self._handle, name)
