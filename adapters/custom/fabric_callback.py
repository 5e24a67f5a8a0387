"""The custom callback with Fabric: an object given to `Fabric(callbacks=...)`, whose hook the loop runs with
`fabric.call` after each optimizer step; it ends training through the loop's `should_stop` flag."""
from __future__ import annotations

from evalkit.adapters.custom.options import PARAM_NORM, StopAtStep, param_norm
from evalkit.adapters.fabric import FabricAdapter


class ParamNormStop:
    def __init__(self, stop_at_step: int):
        self.stop_at_step = stop_at_step

    def on_optimizer_step_end(self, loop, job, model, step):
        job.log_value(PARAM_NORM, param_norm(model))
        if step >= self.stop_at_step:
            loop.should_stop = True


class FabricStopCallback(StopAtStep, FabricAdapter):
    def callbacks(self, job):
        return [*super().callbacks(job), ParamNormStop(self.stop_at_step)]
