"""The custom loss with Ignite: the `loss_fn(y_pred, y)` the training engine is built with, changed."""
from __future__ import annotations

from evalkit.adapters.custom.options import L1Weight
from evalkit.adapters.ignite_engine import IgniteAdapter


class IgniteCustomLoss(L1Weight, IgniteAdapter):
    def loss_function(self, job):
        task_loss, l1_weight = job.task.loss_fn, self.l1_weight
        return lambda y_pred, y: task_loss(y_pred, y) + l1_weight * y_pred.abs().mean()
