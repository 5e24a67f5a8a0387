"""The custom callback with Accelerate, which has no callback system: code after the loop's optimizer step, and a
stop the loop honours. The stop depends only on the step count, the same on every process, so it needs no
`accelerator.set_trigger()` / `check_trigger()` (that is for a condition one process sees: it all-reduces a flag)."""
from __future__ import annotations

from evalkit.adapters.accelerate_loop import AccelerateAdapter
from evalkit.adapters.custom.options import PARAM_NORM, StopAtStep, param_norm


class AccelerateStopCallback(StopAtStep, AccelerateAdapter):
    def after_optimizer_step(self, job, accelerator, step, model):
        job.log_value(PARAM_NORM, param_norm(model))
        return step >= self.stop_at_step
