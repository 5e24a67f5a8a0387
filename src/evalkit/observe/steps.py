"""The record of each optimizer step and of its micro-batches (loss forward hook, optimizer step pre/post hooks,
`GradScaler.update` listener; micro-batches handed in from the model's forward hook).

Per step: the LR of each param group and the loss scale (read before the step), the scheduler steps taken
so far, the global gradient norm (read after the step: a closure-based step runs the backward inside it),
the micro-batches with their sample ids and training losses, and the step's mean loss. A `GradScaler.update`
with micro-batches but no optimizer step is a skipped inf/nan step: its micro-batches are written as
skipped with a "skip" record, not merged into the next step. The step count starts where a resumed
optimizer left off. Deferred mode writes a step's records when the next step ends (or at `flush`).
"""
from __future__ import annotations

import math
import time
from typing import Any

import torch

from evalkit.observe.deferred import LazyFloats, to_floats
from evalkit.observe.hooks import SCALERS, SCHEDULERS
from evalkit.observe.samples import Ids, SampleIds
from evalkit.spool import SpoolWriter


def _global_grad_norm(optimizer: torch.optim.Optimizer) -> torch.Tensor | float | None:
    """The global L2 norm of the gradients the optimizer holds (on CPU summed in Python: fewer torch calls)."""
    grads = [p.grad for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
    if not grads:
        return None
    norms = torch._foreach_norm(grads)
    if grads[0].device.type == "cpu":
        return math.sqrt(sum(float(n) ** 2 for n in norms))
    return torch.linalg.vector_norm(torch.stack(norms))


def resumed_step(optimizer: torch.optim.Optimizer) -> tuple[int, str]:
    """Optimizer steps already taken before this process's first one, read off the optimizer's own
    state (Adam-family keep a per-parameter step count) or else the schedulers' step counts. A resumed
    run whose wrapper did not restore that state starts again at step 1, which the records then show."""
    for state in optimizer.state.values():
        if "step" in state:
            return int(state["step"]), "optimizer state"
    # Both counters, the smaller one: Ignite's LRScheduler handler advances `last_epoch` without calling
    # step() (per micro-batch), Accelerate's scheduler wrapper bumps `_step_count` on non-sync micro-batches;
    # a restored scheduler state has both equal to the steps taken.
    counts = [min(s.last_epoch, s._step_count - 1) for s in SCHEDULERS
              if getattr(s, "optimizer", None) is optimizer]
    if counts:
        return max(counts), "scheduler step count"
    return 0, "fresh start"


class StepRecords:
    """`resuming`: the job resumes from a checkpoint, so the first step's number is read off the optimizer's or
    schedulers' state (`resumed_step`); a fresh job counts from 1 whatever state a wrapper set up before
    training (a scheduler stepped once before the first step is the wrapper's semantics, not a resume)."""

    def __init__(self, spool: SpoolWriter, samples: SampleIds, *, deferred: bool, resuming: bool = False):
        self.spool, self.samples, self.deferred, self.resuming = spool, samples, deferred, resuming
        self.step = 0                       # optimizer steps completed, counted from the start step
        self.skipped = 0                    # steps the GradScaler skipped (inf/nan): no optimizer step
        self.start_source: str | None = None
        self._micro: list[dict] = []        # micro-batches of the step in progress
        self._losses: list[torch.Tensor] = []
        self._pre: dict[str, Any] = {}
        self._unwritten: tuple[dict, list[dict], LazyFloats] | None = None   # deferred: the last step's
        self.rng: int | None = None         # digest of the RNG state at the step's first training forward

    @property
    def in_step(self) -> bool:
        """Whether a training forward of the step in progress was seen already."""
        return bool(self._micro)

    def add_micro(self, train_mode: bool, dtype: str, ids: Ids, n: int) -> None:
        """A training forward of the step in progress."""
        self._micro.append({"kind": "micro", "i": len(self._micro), "n": n,
                            "train_mode": train_mode, "grad": True, "dtype": dtype, "ids": ids})

    def on_loss(self, module, args, output) -> None:
        """Forward hook on the task's loss module: a grad-enabled scalar is a micro-batch's training loss."""
        if torch.is_grad_enabled() and isinstance(output, torch.Tensor) and output.numel() == 1:
            self._losses.append(output.detach())

    def on_scaler_update(self, scaler) -> None:
        """GradScaler.update after micro-batches but no optimizer step: the scaler skipped an inf/nan step.
        Its micro-batches are recorded as skipped, not counted into the next step."""
        if not self._micro or not scaler.is_enabled():
            return
        self.write_unwritten()
        losses = to_floats(self._losses)
        self.samples.resolve(self._micro)
        for micro, loss in zip(self._micro, losses):
            self.spool.add({**micro, "step": self.step, "loss": loss, "skipped": True})
        scale = to_floats([scaler._scale])[0] if scaler._scale is not None else None
        self.spool.add({"kind": "skip", "after_step": self.step, "micro_batches": len(self._micro),
                        "loss_scale": scale, "wall": time.time()})
        self.spool.flush()
        self._micro, self._losses = [], []
        self.skipped += 1

    def on_step_pre(self, optimizer, args, kwargs) -> None:
        """Global optimizer step pre hook: the start step (first call), LRs, loss scale, scheduler steps."""
        if self.start_source is None:
            self.step, self.start_source = resumed_step(optimizer) if self.resuming else (0, "fresh start")
        scale = next((s._scale for s in SCALERS if s.is_enabled() and s._scale is not None), None) \
            if SCALERS else None
        self._pre = {"lr": [g["lr"] for g in optimizer.param_groups], "scale": scale,
                     "sched_steps": sum(max(0, s._step_count - 1) for s in SCHEDULERS)}

    def end_step(self, optimizer: torch.optim.Optimizer, now: float, dt: float, validated_before: bool) -> int:
        """Global optimizer step post hook (called by the observer with the step's clock readings): count the
        step and write its records (deferred: the previous step's). Returns the step's sample count."""
        self.step += 1
        pre, losses, micros = self._pre, self._losses, self._micro
        samples = sum(m["n"] for m in micros)
        record = {"kind": "step", "step": self.step, "t": now, "wall": time.time(), "dt": dt,
                  "lr": pre.get("lr", [g["lr"] for g in optimizer.param_groups]),
                  "micro_batches": len(micros), "loss_calls": len(losses), "samples": samples,
                  "sched_steps": pre.get("sched_steps", 0), "validated_before": validated_before, "rng": self.rng}
        values = [_global_grad_norm(optimizer), pre.get("scale"), *losses]
        if self.deferred:
            self.write_unwritten()
            self._unwritten = (record, micros, LazyFloats(values))
        else:
            self._write(record, micros, to_floats(values))
        self._micro, self._losses, self._pre, self.rng = [], [], {}, None
        return samples

    def _write(self, record: dict, micros: list[dict], floats: list[float | None]) -> None:
        norm, scale, *loss_values = floats
        record.update(grad_norm=norm, loss_scale=scale,
                      loss=sum(loss_values) / len(loss_values) if loss_values else None)
        self.samples.resolve(micros)
        for i, micro in enumerate(micros):
            self.spool.add({**micro, "step": record["step"],
                            **({"loss": loss_values[i]} if i < len(loss_values) else {})})
        self.spool.add(record)
        self.spool.flush()

    def write_unwritten(self) -> None:
        """Deferred mode: write the last step's records (waiting only for their values' copies)."""
        if self._unwritten is not None:
            record, micros, floats = self._unwritten
            self._unwritten = None
            self._write(record, micros, floats.get())
