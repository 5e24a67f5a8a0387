"""The custom callback in the hand-written loop: code after the optimizer step, and a stop."""
from __future__ import annotations

from evalkit.adapters.baseline import BaselineAdapter
from evalkit.adapters.custom.options import PARAM_NORM, StopAtStep, param_norm


class BaselineStopCallback(StopAtStep, BaselineAdapter):
    def after_optimizer_step(self, job, step, model):
        job.log_value(PARAM_NORM, param_norm(model))
        return step >= self.stop_at_step
