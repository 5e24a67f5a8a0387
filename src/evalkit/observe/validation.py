"""Validation metrics computed from the outside (forward hook on the model, forwards without grad).

Each no-grad forward's targets are looked up by its recovered sample ids and scored with the task's metric
and loss; forwards whose ids are unknown are counted as unattributed, not scored. The sums of one
validation run are written as one "val" record when training resumes (the next grad-enabled forward or
optimizer step) or at the end, tagged with the optimizer steps completed before it.

With several ranks each sample's own sums are recorded too (`ids`, `id_sum`, `id_count`, `id_loss`): a distributed
sampler may repeat samples to even out the ranks, and the controller then counts each sample once where the wrapper's
documented evaluation does (`trainer.val_dedup`: Accelerate's gather_for_metrics), and says how many it repeated.
"""
from __future__ import annotations

import torch

from evalkit.spool import SpoolWriter
from evalkit.tasks.catalog import Task


class Validation:
    def __init__(self, task: Task, spool: SpoolWriter, per_sample: bool = False):
        self.task, self.spool, self.per_sample = task, spool, per_sample
        self.in_interval = False         # a validation forward ran since the last optimizer step
        self._sums: dict | None = None   # the sums of the validation run in progress

    def add(self, module: torch.nn.Module, out: torch.Tensor, ids: list[int]) -> None:
        """One validation forward: targets looked up by the recovered sample indices."""
        self.in_interval = True
        val = self._sums = self._sums or {"sum": 0.0, "count": 0, "loss_sum": 0.0, "batches": 0,
                                          "unattributed": 0, "train_mode": 0}
        val["batches"] += 1
        val["train_mode"] += int(module.training)
        if not ids or min(ids) < 0:
            val["unattributed"] += out.shape[0]
            return
        target = self.task.val_set.tensors[1][ids].to(out.device)
        total, count = self.task.metric.batch_stats(out, target)
        loss = float(self.task.loss_fn.forward(out.float(), target))   # .forward: no hooks, not a training loss
        val["sum"] += total
        val["count"] += count
        val["loss_sum"] += loss * count
        if self.per_sample:
            for k, sample in enumerate(ids):
                one_total, one_count = self.task.metric.batch_stats(out[k:k + 1], target[k:k + 1])
                one_loss = float(self.task.loss_fn.forward(out[k:k + 1].float(), target[k:k + 1]))
                for key, value in (("ids", sample), ("id_sum", one_total), ("id_count", one_count),
                                   ("id_loss", one_loss * one_count)):
                    val.setdefault(key, []).append(value)

    def flush(self, step: int) -> None:
        """Write the validation run in progress, if any, as having run after `step` optimizer steps."""
        val, self._sums = self._sums, None
        if val is None:
            return
        metric = self.task.metric
        record = {"kind": "val", "step": step, "metric": metric.name, "finalize": metric.finalize, **val}
        if val["count"]:
            record["value"] = metric.value(val["sum"], val["count"])
            record["loss"] = val["loss_sum"] / val["count"]
        self.spool.add(record)
        self.spool.flush()
