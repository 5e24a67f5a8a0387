"""The model's parameters after each optimizer step (global optimizer step post hook; `observe.params=true`).

One "params" record per step holds every parameter of the task's model, flattened in `parameters()` order
and converted to float32 on the host; the controller stores them as an artifact (`names.PARAMS_CSV_NAME`) to
compare parameter trajectories of tiny models step by step. The copy waits for the device: not for timed runs.
"""
from __future__ import annotations

import torch

from evalkit.spool import SpoolWriter


class ParamRecords:
    def __init__(self, model: torch.nn.Module, spool: SpoolWriter):
        self.model, self.spool = model, spool

    def record(self, step: int) -> None:
        self.spool.add({"kind": "params", "step": step,
                        "values": torch.cat([p.detach().float().reshape(-1).cpu()
                                             for p in self.model.parameters()]).tolist()})
        self.spool.flush()
