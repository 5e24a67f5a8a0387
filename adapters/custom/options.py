"""What every customization shares and is not part of its cost: its two options and the callback's value."""
from __future__ import annotations

from typing import Any

import torch

PARAM_NORM = "custom/param_norm"      # the callback's value, one per optimizer step
DEFAULT_L1_WEIGHT = 0.5
DEFAULT_STOP_AT_STEP = 10


class L1Weight:
    """Takes `l1_weight` out of `trainer.options` before the plain adapter (which refuses unknown options)."""
    option_names = ("l1_weight",)

    def __init__(self, mode: str = "aligned", options: dict[str, Any] | None = None):
        rest = dict(options or {})
        self.l1_weight = float(rest.pop("l1_weight", DEFAULT_L1_WEIGHT))
        super().__init__(mode, rest)


class StopAtStep:
    """Takes `stop_at_step` out of `trainer.options` before the plain adapter."""
    option_names = ("stop_at_step",)

    def __init__(self, mode: str = "aligned", options: dict[str, Any] | None = None):
        rest = dict(options or {})
        self.stop_at_step = int(rest.pop("stop_at_step", DEFAULT_STOP_AT_STEP))
        super().__init__(mode, rest)
        self.ended_by = f"the custom callback's stop after step {self.stop_at_step} (trainer.options.stop_at_step)"


@torch.no_grad()
def param_norm(model: torch.nn.Module) -> float:
    """The L2 norm of all the model's parameters (the value the callback reports after each step)."""
    return float(torch.linalg.vector_norm(torch.cat([p.detach().reshape(-1).double()
                                                     for p in model.parameters()])))
