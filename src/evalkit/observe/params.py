"""The model's parameters after each optimizer step (global optimizer step post hook; `observe.params=true`).

One "params" record per step holds every parameter of the task's model, flattened in `parameters()` order
and converted to float32 on the host, and, where the model has buffers (BatchNorm running statistics), its
buffers in `buffers()` order (`buffers`); the controller stores them as an artifact (`names.PARAMS_CSV_NAME`) to
compare parameter trajectories of tiny models step by step. A resumed job also records the parameters and buffers
it starts from (read at its first training forward, recorded as those after the step it resumes at): the
stability probe compares them with the uninterrupted run's. The copy waits for the device: not for timed runs.
"""
from __future__ import annotations

import torch

from evalkit.spool import SpoolWriter


class ParamRecords:
    def __init__(self, model: torch.nn.Module, spool: SpoolWriter):
        self.model, self.spool = model, spool

    def values(self) -> list[float]:
        return torch.cat([p.detach().float().reshape(-1).cpu() for p in self.model.parameters()]).tolist()

    def state(self) -> dict[str, list[float]]:
        """The parameters (`values`) and, where the model has any, its buffers (`buffers`), now."""
        buffers = [b.detach().float().reshape(-1).cpu() for b in self.model.buffers()]
        return {"values": self.values(), **({"buffers": torch.cat(buffers).tolist()} if buffers else {})}

    def record(self, step: int, state: dict[str, list[float]] | None = None) -> None:
        """The parameters and buffers after `step` (now, unless `state` was read earlier: a resumed job's start)."""
        self.spool.add({"kind": "params", "step": step, **(self.state() if state is None else state)})
        self.spool.flush()
