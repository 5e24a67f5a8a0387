"""The custom callback with the transformers Trainer: a `TrainerCallback` whose `on_step_end` (once per optimizer
step, after it) reports the value and sets `control.should_training_stop`."""
from __future__ import annotations

from transformers import TrainerCallback

from evalkit.adapters.custom.options import PARAM_NORM, StopAtStep, param_norm
from evalkit.adapters.hf_trainer import HFTrainerAdapter


class ParamNormStop(TrainerCallback):
    def __init__(self, job, stop_at_step: int):
        self.job, self.stop_at_step = job, stop_at_step

    def on_step_end(self, args, state, control, model=None, **kwargs):
        self.job.log_value(PARAM_NORM, param_norm(model))
        if state.global_step >= self.stop_at_step:
            control.should_training_stop = True


class HFTrainerStopCallback(StopAtStep, HFTrainerAdapter):
    def callbacks(self, job):
        return [*super().callbacks(job), ParamNormStop(job, self.stop_at_step)]
