"""Customizations of the hand-written loop that do not take effect, or cost what they should not (planted for
tests/e2e/test_probe_customization.py; importable with tests/planted on PYTHONPATH).

- IgnoredLoss: computes the custom loss but backpropagates the task loss alone.
- WrongWeightLoss: the L1 term with twice its weight: neither the custom nor the task loss.
- SilentCallback: a callback registered in a list the loop never calls.
- PerMicroBatchCallback: reports after every micro-batch (2 per optimizer step) and touches `model._modules`,
  a private attribute of torch's Module.
"""
from __future__ import annotations

from evalkit.adapters.baseline import BaselineAdapter
from evalkit.adapters.custom.options import PARAM_NORM, L1Weight, StopAtStep, param_norm


class IgnoredLoss(L1Weight, BaselineAdapter):
    def training_loss(self, net, loss_fn, x, y):
        out = net(x)
        self.custom = loss_fn(out, y) + self.l1_weight * out.abs().mean()
        return loss_fn(out, y)


class WrongWeightLoss(L1Weight, BaselineAdapter):
    def training_loss(self, net, loss_fn, x, y):
        out = net(x)
        return loss_fn(out, y) + 2 * self.l1_weight * out.abs().mean()


class ReportingCallback:
    def __init__(self, job, model, stop_at_step):
        self.job, self.model, self.stop_at_step = job, model, stop_at_step

    def on_step_end(self, step):
        self.job.log_value(PARAM_NORM, param_norm(self.model))
        return step >= self.stop_at_step


class SilentCallback(StopAtStep, BaselineAdapter):
    def fit(self, job):
        self.callbacks = [ReportingCallback(job, job.task.model, self.stop_at_step)]
        super().fit(job)


class PerMicroBatchCallback(StopAtStep, BaselineAdapter):
    def training_loss(self, net, loss_fn, x, y):
        self.job.log_value(PARAM_NORM, param_norm(self.model))
        return loss_fn(net(x), y)

    def fit(self, job):
        self.job, self.model = job, job.task.model
        self.layers = len(job.task.model._modules)
        super().fit(job)

    def after_optimizer_step(self, job, step, model):
        return step >= self.stop_at_step
