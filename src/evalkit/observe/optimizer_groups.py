"""The optimizer a wrapper actually stepped, read from the global optimizer step pre hook: its class, and per
param group the task model's parameters it holds (by name) and its hyperparameters (everything in the group but
`params` and the LR, which the step records carry per step). A wrapper that builds its own optimizer (the
transformers Trainer from `TrainingArguments`) is judged from this record, never from its arguments.

One "optimizer" record at the first step, and another whenever the class, the groups' membership or a
hyperparameter changes (rank 0's, like the parameters). Parameters the optimizer holds that are not the task
model's are counted (`foreign`); the model's parameters in no group are listed (`unoptimized`).
"""
from __future__ import annotations

import math
from typing import Any

import torch

from evalkit.spool import SpoolWriter

SKIPPED_KEYS = ("params", "lr")


def _plain(value: Any) -> Any:
    """A JSON value for a hyperparameter (tensors -> floats, tuples -> lists, other objects -> their type)."""
    if isinstance(value, torch.Tensor):
        return float(value) if value.numel() == 1 else [float(v) for v in value.reshape(-1)]
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return type(value).__name__


class OptimizerGroups:
    def __init__(self, model: torch.nn.Module, spool: SpoolWriter):
        self.spool = spool
        self.names = {id(p): name for name, p in model.named_parameters()}
        self._key_seen: tuple | None = None

    def describe(self, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
        groups, held, foreign = [], set(), 0
        for group in optimizer.param_groups:
            params = []
            for p in group["params"]:
                name = self.names.get(id(p))
                if name is None:
                    foreign += 1
                else:
                    params.append(name)
                    held.add(name)
            groups.append({"params": params, **{k: _plain(v) for k, v in sorted(group.items())
                                                if k not in SKIPPED_KEYS}})
        cls = type(optimizer)
        return {"class": cls.__name__, "module": cls.__module__, "groups": groups, "foreign": foreign,
                "unoptimized": [n for n in self.names.values() if n not in held]}

    @staticmethod
    def _key(optimizer: torch.optim.Optimizer) -> tuple:
        """What a new record depends on, cheap to compare at every step."""
        return (id(optimizer), type(optimizer), tuple(
            (tuple(map(id, g["params"])), repr(sorted((k, v) for k, v in g.items() if k not in SKIPPED_KEYS)))
            for g in optimizer.param_groups))

    def on_step_pre(self, optimizer: torch.optim.Optimizer, step: int) -> None:
        """Before optimizer step `step` (1-based): record the optimizer when it differs from the last record."""
        key = self._key(optimizer)
        if key != self._key_seen:
            self._key_seen = key
            self.spool.add({"kind": "optimizer", "step": step, **self.describe(optimizer)})
