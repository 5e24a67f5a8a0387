"""The custom callback with Poutyne: a `Callback` that sets `model.stop_training`. Poutyne has no event after an
optimizer step: `on_train_batch_end` runs once per micro-batch, and with `batches_per_step` the step falls on every
grad_accum-th batch of an epoch and, for the epoch's shorter last window, after its last batch (`on_epoch_end`)."""
from __future__ import annotations

from poutyne import Callback

from evalkit.adapters.custom.options import PARAM_NORM, StopAtStep, param_norm
from evalkit.adapters.poutyne import PoutyneAdapter


class ParamNormStop(Callback):
    def __init__(self, job, stop_at_step: int):
        super().__init__()
        self.job, self.stop_at_step, self.steps, self.batches = job, stop_at_step, 0, 0

    def on_train_batch_end(self, batch_number, logs):
        self.batches = batch_number
        if batch_number % self.job.grad_accum == 0:
            self.stepped()

    def on_epoch_end(self, epoch_number, logs):
        if self.batches % self.job.grad_accum:
            self.stepped()

    def stepped(self):
        self.steps += 1
        self.job.log_value(PARAM_NORM, param_norm(self.model.network))
        if self.steps >= self.stop_at_step:
            self.model.stop_training = True


class PoutyneStopCallback(StopAtStep, PoutyneAdapter):
    def callbacks(self, job):
        return [*super().callbacks(job), ParamNormStop(job, self.stop_at_step)]
