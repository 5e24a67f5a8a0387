"""Device values read without waiting for the device: the host copies behind deferred mode.

On CUDA a step's scalars (loss, gradient norm, loss scale) and its sample ids' rows are copied to pinned
host memory with `non_blocking=True` and an event recorded behind the copy; they are read when the step's
records are written, one step later, by which time the copy is done. Waiting at each step instead would
drain the device's queue and expose CPU overhead (a wrapper's) that the GPU's work normally hides.
"""
from __future__ import annotations

from typing import Any

import torch


def host_copy(tensor: torch.Tensor) -> tuple[torch.Tensor, Any]:
    """`tensor` copied to the host without waiting for the device (pinned memory on CUDA) and the event to
    wait on before reading it (None on the CPU, where the copy is already done)."""
    if tensor.device.type != "cuda":
        return tensor.detach().clone(), None
    host = torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=True)
    host.copy_(tensor.detach(), non_blocking=True)
    done = torch.cuda.Event()
    done.record(torch.cuda.current_stream(tensor.device))
    return host, done


def to_floats(values: list[torch.Tensor | float | None]) -> list[float | None]:
    """Scalars to floats now, with one device sync at most (CPU tensors convert directly)."""
    on_device = [v for v in values if isinstance(v, torch.Tensor) and v.device.type != "cpu"]
    moved = iter(torch.stack([v.float().reshape(()) for v in on_device]).tolist()) if on_device else iter(())
    return [v if v is None or isinstance(v, float) else float(v) if v.device.type == "cpu" else next(moved)
            for v in values]


class LazyFloats:
    """Scalars (tensors, floats or None) captured now, read as floats later with one wait at most: for
    the device's work up to the capture, not for what was queued since."""

    def __init__(self, values: list[torch.Tensor | float | None]):
        # CPU tensors convert now (no device to wait for); device tensors go to the host in one copy.
        self.values = [float(v) if isinstance(v, torch.Tensor) and v.device.type == "cpu" else v for v in values]
        self.slots = [i for i, v in enumerate(self.values) if isinstance(v, torch.Tensor)]
        self.host, self.done = None, None
        if self.slots:
            device = self.values[self.slots[0]].device
            self.host, self.done = host_copy(torch.stack([self.values[i].detach().float().reshape(()).to(device)
                                                          for i in self.slots]))

    def get(self) -> list[float | None]:
        if self.done is not None:
            self.done.synchronize()
        out = list(self.values)
        for i, value in zip(self.slots, self.host.tolist() if self.host is not None else []):
            out[i] = value
        return out
