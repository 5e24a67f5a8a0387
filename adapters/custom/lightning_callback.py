"""The custom callback in Lightning: a `Callback` whose `on_train_batch_end` acts only on the batches that ended an
optimizer step (`trainer.global_step` moved: Lightning has no hook after the optimizer step, and this one runs once
per micro-batch), and `trainer.should_stop` to end training."""
from __future__ import annotations

import lightning as L

from evalkit.adapters.custom.options import PARAM_NORM, StopAtStep, param_norm
from evalkit.adapters.lightning_trainer import LightningAdapter


class ParamNormStop(L.Callback):
    def __init__(self, job, stop_at_step: int):
        self.job, self.stop_at_step = job, stop_at_step
        self.last_step = 0

    def on_train_start(self, trainer, pl_module):
        self.last_step = trainer.global_step

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.global_step == self.last_step:      # within an accumulation window
            return
        self.last_step = trainer.global_step
        self.job.log_value(PARAM_NORM, param_norm(pl_module))
        if trainer.global_step >= self.stop_at_step:
            trainer.should_stop = True


class LightningStopCallback(StopAtStep, LightningAdapter):
    def callbacks(self, job):
        return [*super().callbacks(job), ParamNormStop(job, self.stop_at_step)]
