"""The model's parameters after each optimizer step (global optimizer step post hook; `observe.params=true`).

One "params" record per step holds every parameter of the task's model, flattened in `parameters()` order
and converted to float32 on the host; the controller stores them as an artifact (`names.PARAMS_CSV_NAME`) to
compare parameter trajectories of tiny models step by step. A resumed job also records the parameters it starts
from (read at its first training forward, recorded as those after the step it resumes at): the stability probe
compares them with the uninterrupted run's. The copy waits for the device: not for timed runs.
"""
from __future__ import annotations

import torch

from evalkit.spool import SpoolWriter


class ParamRecords:
    def __init__(self, model: torch.nn.Module, spool: SpoolWriter):
        self.model, self.spool = model, spool

    def values(self) -> list[float]:
        return torch.cat([p.detach().float().reshape(-1).cpu() for p in self.model.parameters()]).tolist()

    def record(self, step: int, values: list[float] | None = None) -> None:
        """The parameters after `step` (now, unless `values` were read earlier: a resumed job's start)."""
        self.spool.add({"kind": "params", "step": step, "values": self.values() if values is None else values})
        self.spool.flush()
