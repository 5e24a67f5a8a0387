"""The planted loop with the baseline's semantics whose optimizer steps leave no evidence, for the semantic probe's
evidence rules (issue 28: every pass rests on evidence).

`SilentStepAdapter(options={"wrong": NAME})`, NAME one of `SILENT`:
- `evidence.silent_optimizer`: every optimizer step applied by hand (`p -= lr * grad` over the optimizer's
  param groups, under no_grad), never through `torch.optim.Optimizer.step`, so torch's global optimizer step
  hooks, which evalkit's observers read, never fire: training is the baseline's (plain SGD, same windows, LR,
  clipping and order), but no step, no LR and no parameters are recorded. A wrapper with a fused or hand-rolled
  optimizer looks like this. The semantic probe must answer inconclusive (no optimizer step observed), never pass.
"""
from __future__ import annotations

import warnings
from typing import Any

import torch
from planted_loop import PlantedAdapter

from evalkit.contract import TrainJob

SILENT: dict[str, str] = {
    "evidence.silent_optimizer": "optimizer steps applied by hand, bypassing Optimizer.step and its hooks",
}


class SilentStepAdapter(PlantedAdapter):
    def __init__(self, mode: str = "aligned", options: dict[str, Any] | None = None):
        options = dict(options or {})
        silent = options.get("wrong", "evidence.silent_optimizer")
        if silent not in SILENT:
            raise ValueError(f"trainer.options.wrong={silent!r} is not one of {', '.join(SILENT)}")
        super().__init__(mode, {**options, "wrong": "none"})
        self.silent = silent

    def fit(self, job: TrainJob) -> None:
        with warnings.catch_warnings():      # torch warns of scheduler steps without an optimizer step
            warnings.simplefilter("ignore", UserWarning)
            super().fit(job)

    def _optimizer_step(self, job: TrainJob, model, optimizer, scaler) -> None:
        params = [p for p in model.parameters() if p.grad is not None]
        if job.grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(params, job.grad_clip)
        with torch.no_grad():                # plain SGD (the truth caliber's: no momentum, no weight decay)
            for group in optimizer.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        p.add_(p.grad, alpha=-group["lr"])
        optimizer.zero_grad(set_to_none=True)

    def _record_settings(self, job: TrainJob) -> None:
        super()._record_settings(job)
        self._effective.update({"planted": self.silent, "loop": "silent (tests/planted/silent_loop.py)"})
