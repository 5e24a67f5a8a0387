"""Which samples each forward pass saw, recovered from the model's input (forward pre hook on the model).

The first tensor of the model's input is fingerprinted and looked up in the task's train set (training
forwards, grad enabled) or val set (no grad); a row that matches nothing, or two samples, is -1
("unattributed"), never a guess. Deferred mode copies a training micro-batch's rows to the host without
waiting and looks them up when its step's records are written. Counts the unattributed training samples.
"""
from __future__ import annotations

import torch

from evalkit.observe.deferred import host_copy
from evalkit.observe.hooks import first_tensor
from evalkit.tasks.catalog import Task
from evalkit.tasks.order import FINGERPRINT_WIDTH, SampleIndex


class DeferredIds:
    """A training micro-batch's sample ids, looked up when its step's record is written: its first values
    are copied to the host without waiting for the device, so the observer adds no device sync per
    micro-batch."""

    def __init__(self, index: SampleIndex, rows: torch.Tensor):
        self.index, self.n = index, rows.shape[0]
        self.host, self.done = host_copy(rows.reshape(rows.shape[0], -1)[:, :FINGERPRINT_WIDTH])

    def resolve(self) -> list[int]:
        if self.done is not None:
            self.done.synchronize()
        return self.index.lookup(self.host, "train")


Ids = list[int] | DeferredIds


class SampleIds:
    """The ids of the forward pass in progress, and the count of unattributed training samples. Off
    (`enabled=False`), every micro-batch's ids are [] and its size is read off the model's output."""

    def __init__(self, task: Task, *, deferred: bool, enabled: bool = True):
        self.index = SampleIndex(task.train_set.tensors[0], task.val_set.tensors[0]) if enabled else None
        self.deferred = deferred
        self.unattributed = 0
        self._pending: Ids | None = None

    def on_forward_pre(self, args: tuple, kwargs: dict, training: bool) -> None:
        self._pending = None
        if self.index is None:
            return
        rows = first_tensor(args) if args else first_tensor(kwargs)
        if rows is not None:
            self._pending = (DeferredIds(self.index, rows) if training and self.deferred
                             else self.index.lookup(rows, "train" if training else "val"))

    def take(self) -> Ids:
        """The ids recovered at the forward pre hook ([] when none were)."""
        return self._pending or []

    def size(self, ids: Ids, out: torch.Tensor | None) -> int:
        """A training micro-batch's sample count (its ids', else the output's batch size); counts its
        unattributed ids unless they are deferred (then `resolve` counts them)."""
        if isinstance(ids, DeferredIds):
            return ids.n
        self.unattributed += sum(1 for i in ids if i < 0)
        return len(ids) if ids else (out.shape[0] if out is not None else 0)

    def resolve(self, micros: list[dict]) -> None:
        """Deferred sample ids looked up in the micro-batch records (their copies to the host are waited for)."""
        for micro in micros:
            if isinstance(micro["ids"], DeferredIds):
                micro["ids"] = micro["ids"].resolve()
                self.unattributed += sum(1 for i in micro["ids"] if i < 0)
