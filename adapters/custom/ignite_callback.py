"""The custom callback with Ignite: an event handler on `ITERATION_COMPLETED` that ends training with
`engine.terminate()`. An engine iteration is a micro-batch when `create_supervised_trainer` accumulates gradients
(defaults mode), so the handler filters to every `grad_accum`-th one there: the iterations that stepped."""
from __future__ import annotations

from ignite.engine import Events

from evalkit.adapters.custom.options import PARAM_NORM, StopAtStep, param_norm
from evalkit.adapters.ignite_engine import IgniteAdapter


class IgniteStopCallback(StopAtStep, IgniteAdapter):
    def attach_handlers(self, job, trainer, model):
        super().attach_handlers(job, trainer, model)
        per_step = 1 if self.mode == "aligned" else job.grad_accum

        @trainer.on(Events.ITERATION_COMPLETED(every=per_step))
        def param_norm_stop(engine):
            job.log_value(PARAM_NORM, param_norm(model))
            if engine.state.iteration // per_step >= self.stop_at_step:
                engine.terminate()
