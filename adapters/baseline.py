"""The hand-written PyTorch training loop: the control every wrapper is compared with.

Semantics, stated once:
- an optimizer step consumes a window of `grad_accum` micro-batches (the last window of an epoch may be shorter);
  the window's loss is the mean over all its loss terms: on a task with a fixed number of terms per sample, each
  micro-batch loss divided by the size of the window actually accumulated; on a task whose batches hold different
  numbers of terms (`task.loss_terms`: tiny_lm's non-padding target tokens), the token mean over the WHOLE window,
  each micro-batch's token-mean loss weighted by its tokens / the window's tokens (over all ranks: the count is
  all-reduced before the window's first backward), never the mean of micro-batch means;
- gradients are unscaled (fp16) before clipping to `grad_clip` (global L2 norm);
- the LR scheduler steps once per optimizer step (also when GradScaler skips an inf/nan step);
- validation runs after every `val_every` optimizer steps and after the last one;
- a checkpoint after every `ckpt_every` steps and the last one holds model, optimizer, scheduler,
  scaler, RNG states, data position and step, so a resumed run continues bit for bit.
"""
from __future__ import annotations

import contextlib
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from evalkit.contract import TrainJob, WrapperAdapter
from evalkit.contract.checkpoint import atomic_save, capture_rng, latest_checkpoint, restore_rng, safe_load

CHECKPOINT_FORMAT = 1


class BaselineAdapter(WrapperAdapter):
    option_names = ()   # trainer.options: none (a key is refused, with the nearest: evalkit.contract.options)
    # ------------------------------------------------------------------ the loop
    def fit(self, job: TrainJob) -> None:
        device = job.device
        if device.type == "cuda":
            torch.cuda.set_device(device)
        if job.distributed and not dist.is_initialized():
            if device.type == "cuda":      # device_id binds NCCL (and its barriers) to this rank's GPU
                dist.init_process_group("nccl", device_id=device)
            else:
                dist.init_process_group("gloo")

        model = job.task.model.to(device)
        net = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None) \
            if job.distributed else model
        if job.compile:     # the DDP-wrapped model, as PyTorch's DDP notes compile it (DDPOptimizer splits the graph)
            net = torch.compile(net)
        loss_fn = job.task.loss_fn
        optimizer = job.make_optimizer(model.parameters())
        scheduler = job.make_scheduler(optimizer)
        scaler = torch.amp.GradScaler(device.type, enabled=job.precision.grad_scaler)

        step, epoch, batch_in_epoch = 0, 0, 0
        if job.resume_from:
            step, epoch, batch_in_epoch = self._load(job, model, optimizer, scheduler, scaler)
        self._record_settings(job, net, scaler, step)

        batches_per_epoch = job.train_sampler().batches_per_epoch
        model.train()
        stop = False
        while step < job.max_steps and not stop:
            batches = iter(job.train_loader(epoch, start_batch=batch_in_epoch))
            while batch_in_epoch < batches_per_epoch and step < job.max_steps and not stop:
                window = min(job.grad_accum, batches_per_epoch - batch_in_epoch)
                micro = [next(batches) for _ in range(window)]
                weights = self.token_weights(job, [y for _, y in micro])
                for i, batch in enumerate(micro):
                    x, y = (t.to(device, non_blocking=True) for t in batch)
                    last = i == window - 1
                    # DDP all-reduces gradients only on the window's last backward.
                    sync = contextlib.nullcontext() if last or not job.distributed else net.no_sync()
                    with sync:
                        with job.precision.autocast(device):
                            loss = self.training_loss(net, loss_fn, x, y)
                            loss = loss / window if weights is None else loss * weights[i]
                        scaler.scale(loss).backward()
                batch_in_epoch += window

                if job.grad_clip is not None:
                    scaler.unscale_(optimizer)
                    torch.nn.utils.clip_grad_norm_(model.parameters(), job.grad_clip)
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad(set_to_none=True)
                scheduler.step()
                step += 1
                stop = self.after_optimizer_step(job, step, model)

                if job.should_validate(step) or stop:
                    # compiled at one rank; under DDP the plain model (no collective in an uneven validation)
                    self._validate(job, net if job.compile and not job.distributed else model)
                if job.should_checkpoint(step):
                    at_end = batch_in_epoch == batches_per_epoch
                    self._save(job, step, epoch + at_end, 0 if at_end else batch_in_epoch,
                               model, optimizer, scheduler, scaler)
            if not stop:
                epoch, batch_in_epoch = epoch + 1, 0
        if job.distributed:
            dist.barrier()

    # ------------------------------------------------------------------ where a user's own loop changes
    def training_loss(self, net: torch.nn.Module, loss_fn: torch.nn.Module, x: torch.Tensor,
                      y: torch.Tensor) -> torch.Tensor:
        """One micro-batch's loss (the loop divides it by the window's size, or weights it by its tokens)."""
        return loss_fn(net(x), y)

    @staticmethod
    def token_weights(job: TrainJob, targets: list[torch.Tensor]) -> list[float] | None:
        """Each micro-batch's weight in its window's token mean (`TrainJob.token_weights`), None for a task of a
        fixed number of loss terms per sample."""
        return job.token_weights(targets)

    def after_optimizer_step(self, job: TrainJob, step: int, model: torch.nn.Module) -> bool:
        """Called once after each optimizer step (and the scheduler's); True ends training after this step."""
        return False

    @torch.no_grad()
    def _validate(self, job: TrainJob, model: torch.nn.Module) -> None:
        """Forward the validation split in eval mode; evalkit's observers compute the metrics."""
        model.eval()
        for x, _ in job.val_loader():
            with job.precision.autocast(job.device):
                model(x.to(job.device, non_blocking=True))
        model.train()

    # ------------------------------------------------------------------ checkpoints
    def _save(self, job, step, epoch, batch_in_epoch, model, optimizer, scheduler, scaler) -> None:
        if job.rank != 0:
            return
        atomic_save({
            "format": CHECKPOINT_FORMAT, "step": step, "epoch": epoch, "batch_in_epoch": batch_in_epoch,
            "model": model.state_dict(), "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(), "scaler": scaler.state_dict(), "rng": capture_rng(),
        }, job.checkpoint_path(step))

    def _load(self, job, model, optimizer, scheduler, scaler) -> tuple[int, int, int]:
        path = latest_checkpoint(job.resume_from)
        state = safe_load(path)
        if state.get("format") != CHECKPOINT_FORMAT:
            raise ValueError(f"{path} is not a baseline checkpoint (format {state.get('format')!r}); "
                             "resume the baseline from a checkpoint the baseline wrote")
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        scaler.load_state_dict(state["scaler"])
        restore_rng(state["rng"])
        self._effective["resumed_from"] = os.path.abspath(path)
        return state["step"], state["epoch"], state["batch_in_epoch"]

    def _record_settings(self, job: TrainJob, net, scaler, start_step: int) -> None:
        self._effective.update({
            "loop": "hand-written (adapters/baseline.py)",
            "optimizer_step_unit": f"{job.grad_accum} micro-batches (shorter at epoch end)",
            "loss_division": "by the window's token count (sum of token losses / the window's target tokens on all "
                             "ranks)" if job.task.loss_terms is not None else
                             "by the size of the window actually accumulated",
            "scheduler_step": "once per optimizer step",
            "grad_clip": job.grad_clip, "clip_after_unscale": True,
            "precision": job.precision.name,
            "autocast_dtype": str(job.precision.autocast_dtype) if job.precision.autocast_dtype else None,
            "grad_scaler": scaler.is_enabled(),
            "ddp": "DistributedDataParallel" in (type(net).__name__, type(getattr(net, "_orig_mod", None)).__name__),
            "compiled": ("torch.compile(net): the DDP-wrapped model at world size 2; validation through it at "
                         "world size 1") if job.compile else None,
            "world_size": job.world_size, "max_steps": job.max_steps,
            "val_every": job.val_every, "ckpt_every": job.ckpt_every, "start_step": start_step,
        })
