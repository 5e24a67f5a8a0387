"""The `timing` profile's step records: what throughput needs, at the least cost per step (model forward hook,
loss forward hook on CPU, optimizer step post hook, `GradScaler.update` listener; the step pre hook only when
resuming, to read the start step before the first step changes the optimizer's state).

One "step" record per optimizer step: its clock readings, the LR of each param group (read after the step,
before the scheduler's step), the training forwards since the last step and their samples (the first
dimension of the model's input, as the `full` profile counts them, else of its output: no sample ids are
recovered), the mean training loss on CPU (a CPU scalar reads for free; on a device it would cost a copy per
step, so none there) and whether validation ran before it. No micro-batch records, gradient norm, loss scale
or scheduler count. A `GradScaler.update` after forwards but no optimizer step (an inf/nan skip) writes a
"skip" record; its forwards are not counted into the next step, as in the `full` profile.

Step records are kept as tuples and written every `WRITE_EVERY` steps (and by `write_unwritten`: at the end, and
when the worker fails): serializing and writing a record per step cost about 35 us, a 2 % overhead on a 2 ms
step. A worker killed outright loses at most that many steps' records; the probes' timed jobs use this profile,
and their judge reads only what finished.
"""
from __future__ import annotations

import time

import torch

from evalkit.observe.deferred import to_floats
from evalkit.observe.steps import resumed_step
from evalkit.spool import SpoolWriter

WRITE_EVERY = 100      # steps whose records are written together


class LightStepRecords:
    def __init__(self, spool: SpoolWriter, *, read_loss: bool, resuming: bool = False):
        self.spool, self.read_loss, self.resuming = spool, read_loss, resuming
        self._held: list[tuple] = []        # step records not written yet
        self.step = 0                       # optimizer steps completed, counted from the start step
        self.skipped = 0                    # steps the GradScaler skipped (inf/nan): no optimizer step
        self.start_source: str | None = None if resuming else "fresh start"
        self._forwards = 0                  # training forwards of the step in progress
        self._samples = 0                   # ... and their samples
        self._losses: list[float] = []      # ... and their losses (CPU only)

    def add_forward(self, rows: torch.Tensor | None) -> None:
        """A training forward of the step in progress; the first dimension of `rows` counts its samples."""
        self._forwards += 1
        if rows is not None and rows.dim():
            self._samples += rows.shape[0]

    def on_loss(self, module, args, output) -> None:
        """Forward hook on the task's loss module (registered on CPU only): a grad-enabled scalar is a training
        loss; a CPU tensor's value is read without waiting for anything."""
        if torch.is_grad_enabled() and isinstance(output, torch.Tensor) and output.numel() == 1:
            self._losses.append(output.item())

    def on_step_pre(self, optimizer, args, kwargs) -> None:
        """Global optimizer step pre hook, registered only when resuming: the start step, before the first step."""
        if self.start_source is None:
            self.step, self.start_source = resumed_step(optimizer)

    def on_scaler_update(self, scaler) -> None:
        """GradScaler.update after forwards but no optimizer step: the scaler skipped an inf/nan step."""
        if not self._forwards or not scaler.is_enabled():
            return
        self.write_unwritten()              # records in the order they happened
        scale = to_floats([scaler._scale])[0] if scaler._scale is not None else None
        self.spool.add({"kind": "skip", "after_step": self.step, "micro_batches": self._forwards,
                        "loss_scale": scale, "wall": time.time()})
        self.spool.flush()
        self._forwards, self._samples, self._losses = 0, 0, []
        self.skipped += 1

    def end_step(self, optimizer: torch.optim.Optimizer, now: float, dt: float, validated_before: bool) -> int:
        """Global optimizer step post hook (called by the observer with the step's clock readings): count the
        step and write its record. Returns the step's sample count."""
        self.step += 1
        samples, losses = self._samples, self._losses
        self._held.append((self.step, now, time.time(), dt, [g["lr"] for g in optimizer.param_groups],
                           self._forwards, losses, samples, validated_before))
        self._forwards, self._samples, self._losses = 0, 0, []
        if len(self._held) >= WRITE_EVERY:
            self.write_unwritten()
        return samples

    def write_unwritten(self) -> None:
        """Write the step records held back."""
        for step, now, wall, dt, lr, forwards, losses, samples, validated in self._held:
            self.spool.add({"kind": "step", "step": step, "t": now, "wall": wall, "dt": dt, "lr": lr,
                            "micro_batches": forwards, "loss_calls": len(losses), "samples": samples,
                            "loss": sum(losses) / len(losses) if losses else None, "validated_before": validated})
        self._held.clear()
        self.spool.flush()
