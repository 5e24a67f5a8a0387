"""The dtype each training micro-batch was computed in (forward hooks on the first Linear/Conv layer and on the
model), counted for the run's summary (`observed_dtypes`).

The dtype is read off the first Linear/Conv layer's output: a wrapper may cast the model's outputs back to
fp32 (Accelerate does), which would hide the precision it ran in. A model without such a layer reports the
dtype of its own output; a forward with no tensor output reports "none".
"""
from __future__ import annotations

from collections import Counter

import torch

_LAYERS = (torch.nn.Linear, torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d)


def compute_layer(model: torch.nn.Module) -> torch.nn.Module:
    """The module whose output dtype is the compute dtype: the first Linear/Conv layer, else the model."""
    return next((m for m in model.modules() if isinstance(m, _LAYERS)), model)


class ComputeDtypes:
    def __init__(self) -> None:
        self.counts: Counter = Counter()       # dtype name -> training micro-batches computed in it
        self._layer_dtype: torch.dtype | None = None

    def on_compute_layer(self, module, args, output) -> None:
        """Forward hook on `compute_layer(model)`."""
        self._layer_dtype = output.dtype if isinstance(output, torch.Tensor) else None

    def read(self, out: torch.Tensor | None) -> str:
        """The dtype name of the forward pass that just ended ("bfloat16"), given the model's output."""
        dtype = self._layer_dtype or (out.dtype if out is not None else None)
        self._layer_dtype = None
        return str(dtype).removeprefix("torch.") if dtype is not None else "none"

    def count(self, dtype: str) -> None:
        self.counts[dtype] += 1
