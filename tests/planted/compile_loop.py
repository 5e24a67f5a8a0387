"""The baseline loop with one known way of failing torch.compile, for the compile probe's tests.

`CompileLoopAdapter(options={"plant": P})`: `none` is the baseline itself; `ignores` drops the run's compile request
(trains eager whatever `train.compile` says: a wrapper that never passes the flag on); `halves` halves every
micro-batch's loss when the model is compiled, so every compiled update is half the eager one (a compiled path that
computes another step).
"""
from __future__ import annotations

import dataclasses

import torch

from evalkit.adapters.baseline import BaselineAdapter
from evalkit.contract import TrainJob

PLANTS = ("none", "ignores", "halves")


class CompileLoopAdapter(BaselineAdapter):
    option_names = ("plant",)

    def fit(self, job: TrainJob) -> None:
        plant = self.options.get("plant", "none")
        if plant not in PLANTS:
            raise ValueError(f"trainer.options.plant={plant!r}: choose among {', '.join(PLANTS)}")
        self._plant = plant
        super().fit(dataclasses.replace(job, compile=False) if plant == "ignores" else job)

    def training_loss(self, net, loss_fn, x, y) -> torch.Tensor:
        loss = super().training_loss(net, loss_fn, x, y)
        compiled = isinstance(net, torch._dynamo.eval_frame.OptimizedModule)
        return loss * 0.5 if self._plant == "halves" and compiled else loss
