"""The baseline loop with planted stability faults, for the stability probe's tests.

`UnstableAdapter(options={...})` is the baseline (adapters/baseline.py) but for the faults its options plant:
- `resume_wrongs`: {name of the killed job whose checkpoints are resumed (found in `resume_from`, `_` for `-`):
  wrong}, wrong one
  of `no_rng` (RNG state not restored), `no_optimizer` (optimizer state not restored), `no_scheduler` (scheduler
  state not restored), `repeat_step` (the step of the checkpoint trained again: counter and data position one step
  back), `data_restart` (the data position lost: the epoch starts again), `no_buffers` (the weights restored, the
  buffers not: BatchNorm running statistics back at their start, issue 44). Keyed by the killed job so that one probe
  run can plant a different wrong in each resume it makes;
- `in_place: true`: checkpoints written in place (no temporary file, no checksum): a kill during the write leaves a
  truncated file where the next resume finds it;
- `fresh_on_corrupt: true`: a checkpoint that cannot be read is skipped, training starts from scratch;
- `swallow_oom: true`: an out-of-memory error ends `fit` quietly (exit 0);
- `leak_kb`: this many KiB kept alive after every optimizer step (a leak).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch.optim.optimizer import register_optimizer_step_post_hook

from evalkit.adapters.baseline import CHECKPOINT_FORMAT, BaselineAdapter
from evalkit.contract.checkpoint import CorruptCheckpoint, latest_checkpoint, restore_rng, safe_load

RESUME_WRONGS = ("no_rng", "no_optimizer", "no_scheduler", "repeat_step", "data_restart", "no_buffers")


class UnstableAdapter(BaselineAdapter):
    option_names = ("resume_wrongs", "leak_kb", "swallow_oom", "in_place", "fresh_on_corrupt")
    def __init__(self, mode: str = "aligned", options: dict[str, Any] | None = None):
        super().__init__(mode, options)
        self.resume_wrongs = dict(self.options.get("resume_wrongs", {}))
        unknown = set(self.resume_wrongs.values()) - set(RESUME_WRONGS)
        if unknown:
            raise ValueError(f"resume_wrongs: {sorted(unknown)} not among {RESUME_WRONGS}")
        self.leaked: list[np.ndarray] = []

    def fit(self, job) -> None:
        hook = None
        if self.options.get("leak_kb"):
            size = int(self.options["leak_kb"]) * 1024 // 8
            hook = register_optimizer_step_post_hook(lambda *_: self.leaked.append(np.ones(size)))
        try:
            super().fit(job)
        except torch.OutOfMemoryError:
            if not self.options.get("swallow_oom"):
                raise
        finally:
            if hook is not None:
                hook.remove()

    def _wrong(self, job) -> str | None:
        """The wrong planted for this resume: keyed by the killed job's name (`kill_between` for kill-between)."""
        found = f"{job.resume_from}/"
        return next((w for source, w in self.resume_wrongs.items() if f"/{source.replace('_', '-')}/" in found), None)

    def _save(self, job, step, epoch, batch_in_epoch, model, optimizer, scheduler, scaler) -> None:
        if not self.options.get("in_place"):
            return super()._save(job, step, epoch, batch_in_epoch, model, optimizer, scheduler, scaler)
        import os

        from evalkit.contract.checkpoint import capture_rng
        os.makedirs(job.ckpt_dir, exist_ok=True)
        torch.save({"format": CHECKPOINT_FORMAT, "step": step, "epoch": epoch, "batch_in_epoch": batch_in_epoch,
                    "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(), "scaler": scaler.state_dict(), "rng": capture_rng()},
                   job.checkpoint_path(step))

    def _load(self, job, model, optimizer, scheduler, scaler) -> tuple[int, int, int]:
        wrong = self._wrong(job)
        try:
            state = safe_load(latest_checkpoint(job.resume_from))
        except CorruptCheckpoint:
            if self.options.get("fresh_on_corrupt"):
                return 0, 0, 0
            raise
        model.load_state_dict(state["model"])
        if wrong == "no_buffers":
            for module in model.modules():
                if isinstance(module, torch.nn.modules.batchnorm._NormBase):
                    module.reset_running_stats()
        if wrong != "no_optimizer":
            optimizer.load_state_dict(state["optimizer"])
        if wrong != "no_scheduler":
            scheduler.load_state_dict(state["scheduler"])
        scaler.load_state_dict(state["scaler"])
        if wrong != "no_rng":
            restore_rng(state["rng"])
        step, epoch, batch = state["step"], state["epoch"], state["batch_in_epoch"]
        if wrong == "repeat_step":
            return step - 1, epoch, max(0, batch - job.grad_accum)
        if wrong == "data_restart":
            return step, epoch, 0
        return step, epoch, batch
