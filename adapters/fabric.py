"""Lightning `Fabric` on an evalkit task.

Fabric is a toolkit, not a loop: the adapter writes the loop and lets Fabric own what Fabric owns, all
through its documented API: processes and the process group (`Fabric(...)`, `fabric.launch()`), device
placement and DDP wrapping (`fabric.setup`), data loading (`fabric.setup_dataloaders`), precision
(`forward` under the precision plugin's autocast, `fabric.autocast()`, `fabric.backward` with the
plugin's GradScaler), gradient-sync control (`fabric.no_backward_sync`), clipping
(`fabric.clip_gradients`, which unscales first) and checkpoints (`fabric.save` / `fabric.load`). No
monkeypatching.

Processes: evalkit's launcher starts the ranks with torch elastic variables; Fabric detects
`TorchElasticEnvironment`, so `fabric.launch()` starts nothing and joins the process group.

Modes
- `aligned`: the loop has the baseline's semantics exactly: windows of `grad_accum` micro-batches (the
  last one of an epoch shorter, losses divided by the window's actual size), DDP gradient sync only on
  a window's last backward, the loss computed under `fabric.autocast()` like the baseline's, clipping
  with `error_if_nonfinite=False` (torch's default, the baseline's), the scheduler stepped once per
  optimizer step, evalkit's sampler (`use_distributed_sampler=False`), validation calling evalkit's model
  under `fabric.autocast()` in eval mode without grad, checkpoints holding model, optimizer, scheduler,
  GradScaler (a `MixedPrecision` plugin built with our scaler on CUDA fp16), RNG states and the data
  position, so a resumed run continues bit for bit.
- `defaults`: what the Fabric quick start writes: `Fabric(accelerator, devices, precision)` with the
  default strategy, `fabric.setup_dataloaders(loader)` (Fabric's distributed sampler over evalkit's
  global order), the loss outside autocast on the fp32 output Fabric hands back, a window of
  `grad_accum` batches counted within each epoch with the loss divided by `grad_accum` (leftover batches
  at an epoch end spill into the next epoch's first window), `fabric.clip_gradients(max_norm=...)` with
  its default `error_if_nonfinite=True`, validation through the Fabric-wrapped model, checkpoints of
  model, optimizer, scheduler, step and epoch only (a resumed run's data starts again from Fabric's first
  pass: Fabric sets the sampler's epoch to its own pass count, which no checkpoint holds).
"""
from __future__ import annotations

import os
from typing import Any

import torch
from torch.utils.data import DataLoader

from adapters.calls import Call, built
from evalkit.checkpoint import capture_rng, latest_checkpoint, restore_rng
from evalkit.contract import TrainJob, UnsupportedCombination, WrapperAdapter
from evalkit.tasks.order import OrderedSampler

PRECISIONS = {"fp32": "32-true", "bf16_mixed": "bf16-mixed", "fp16_mixed": "16-mixed"}
CKPT_SUFFIX = ".ckpt"
PRECISION_DOCS = "https://lightning.ai/docs/fabric/stable/api/fabric_args.html#precision"   # the values it takes


# The setting that aligns each kind of semantic finding (probe codes, or their family before the dot), reported as
# `aligns` in the effective config; the semantic probe names it beside each finding.
ALIGNS = {
    "window.short_merged": "step on an epoch's last batch too: is_accumulating = (i + 1) % grad_accum != 0 and "
                           "i + 1 < len(loader)",
    "window.short_underscaled": "divide each loss by the window's actual size, not grad_accum",
    "order": "fabric.setup_dataloaders(loader, use_distributed_sampler=False) over evalkit's sampler",
    "clip": "fabric.clip_gradients(model, optimizer, max_norm=max_norm, error_if_nonfinite=False)",
}

def aligned_clipping(job: TrainJob) -> dict[str, Any]:
    """`fabric.clip_gradients`' arguments in aligned mode: the baseline's clipping (torch's defaults)."""
    return {"max_norm": job.grad_clip, "norm_type": 2.0, "error_if_nonfinite": False}


class FabricPassSampler(OrderedSampler):
    """evalkit's order for a training DataLoader that Fabric iterates once per epoch.

    Fabric's DataLoader wrapper calls `set_epoch(number of passes so far)` on the sampler before each
    pass (on any sampler with `set_epoch`, not only a DistributedSampler). A resumed run's first pass is
    the epoch it resumed in, so the pass count is offset by that epoch; `start_batch` skips the micro-batches
    of that epoch consumed before the checkpoint.
    """

    def __init__(self, job: TrainJob, epoch: int = 0, start_batch: int = 0):
        super().__init__(len(job.task.train_set), job.batch_size, job.seed, job.rank, job.world_size,
                         epoch=epoch, start_batch=start_batch)
        self.first_epoch = epoch

    def set_epoch(self, epoch: int) -> None:
        super().set_epoch(self.first_epoch + epoch)


class FabricAdapter(WrapperAdapter):
    """`trainer=fabric`: a loop written with Lightning Fabric (see the module docstring)."""

    distributions = ("lightning", "lightning-utilities")
    preload_modules = ("lightning.fabric", "lightning.fabric.plugins", "lightning.fabric.strategies")

    def __init__(self, mode: str = "aligned", options: dict[str, Any] | None = None):
        super().__init__(mode, options)
        if self.options:   # none are defined: a typo must not pass silently
            raise ValueError(f"the fabric adapter takes no trainer.options, got {sorted(self.options)}")

    # ------------------------------------------------------------------ set-up
    def _fabric(self, job: TrainJob):
        from lightning.fabric import Fabric
        from lightning.fabric.plugins import MixedPrecision
        from lightning.fabric.strategies import DDPStrategy, SingleDeviceStrategy

        if job.precision.name not in PRECISIONS:
            raise UnsupportedCombination(f"precision {job.precision.name!r} has no Fabric equivalent",
                                         UnsupportedCombination.DOCUMENTED, documented_at=PRECISION_DOCS)
        precision = PRECISIONS[job.precision.name]
        accelerator = "cuda" if job.device.type == "cuda" else "cpu"
        if self.mode != "aligned":
            return Fabric(accelerator=accelerator, devices=job.world_size, num_nodes=1, precision=precision,
                          callbacks=self.callbacks(job)), None, {}

        if precision == "16-mixed" and job.device.type == "cpu":
            raise UnsupportedCombination(
                "fabric turns precision='16-mixed' into bf16-mixed on CPU; fp16_mixed cannot run on CPU",
                UnsupportedCombination.SUBSTITUTION)
        backend = "nccl" if job.device.type == "cuda" else "gloo"
        arguments: dict[str, Any] = {   # Fabric(...)'s arguments, reported as they are under explicit_settings
            "accelerator": accelerator, "devices": job.world_size, "num_nodes": 1,
            "strategy": (Call(DDPStrategy, process_group_backend=backend, find_unused_parameters=False,
                              gradient_as_bucket_view=False, static_graph=False)
                         if job.distributed else Call(SingleDeviceStrategy, device=str(job.device))),
        }
        scaler = None
        if job.precision.grad_scaler:
            # Our own GradScaler (torch defaults, like the baseline's) so the checkpoint can hold its state.
            scaler = Call(torch.amp.GradScaler, job.device.type).named("torch.amp.GradScaler")
            arguments["plugins"] = Call(MixedPrecision, precision, job.device.type, scaler=scaler)
        else:
            arguments["precision"] = precision
        fabric = Fabric(**built(arguments), callbacks=self.callbacks(job))
        explicit = {
            **arguments,
            "setup_dataloaders": "once, use_distributed_sampler=False, move_to_device=True; evalkit's OrderedSampler "
                                 "shard, its epoch = Fabric's pass count (+ the epoch resumed in)",
            "accumulation": f"windows of {job.grad_accum} micro-batches, the last of an epoch shorter; loss / "
                            "window size; no_backward_sync on all but the window's last backward",
            "loss": "job.task.loss_fn(model(x), y) under fabric.autocast()",
            "clip_gradients": (", ".join(f"{k}={v}" for k, v in aligned_clipping(job).items())
                               if job.grad_clip is not None else None),
            "zero_grad": "set_to_none=True after each optimizer step",
            "scheduler": "stepped once per optimizer step",
            "validation": "evalkit's model (unwrapped) in eval mode under torch.no_grad() and fabric.autocast()",
            "checkpoint_state": "model, optimizer, scheduler, grad scaler, rng, step, epoch, batch_in_epoch",
            "seed_everything": "not called: evalkit seeded the process before building the task, as for the "
                               "baseline (re-seeding would shift the RNG stream)",
        }
        return fabric, (scaler.build() if scaler is not None else None), explicit

    # ------------------------------------------------------------------ fit
    def fit(self, job: TrainJob) -> None:
        self.should_stop = False     # set by a callback (fabric.call) to end training after the current step
        fabric, scaler, explicit = self._fabric(job)
        fabric.launch()   # under torch elastic variables: joins the group, spawns nothing
        raw_model = job.task.model
        optimizer = job.make_optimizer(raw_model.parameters())
        scheduler = job.make_scheduler(optimizer)
        model, optimizer = fabric.setup(raw_model, optimizer)
        if self.mode == "aligned":
            self._fit_aligned(job, fabric, raw_model, model, optimizer, scheduler, scaler)
        else:
            self._fit_defaults(job, fabric, model, optimizer, scheduler)
        fabric.barrier()
        self._effective = self._report(fabric, job, explicit)

    def _fit_aligned(self, job, fabric, raw_model, model, optimizer, scheduler, scaler) -> None:
        loss_fn = job.task.loss_fn
        state = {"model": model, "optimizer": optimizer, "scheduler": scheduler, "step": 0, "epoch": 0,
                 "batch_in_epoch": 0, "rng": None}
        if scaler is not None:
            state["scaler"] = scaler
        if job.resume_from:
            self._load(job, fabric, state)
            restore_rng(state["rng"])
        step, epoch, batch_in_epoch = state["step"], state["epoch"], state["batch_in_epoch"]
        self._start_step = step

        sampler = FabricPassSampler(job, epoch, batch_in_epoch)
        batches_per_epoch = sampler.batches_per_epoch
        loader = fabric.setup_dataloaders(
            DataLoader(job.task.train_set, batch_size=job.batch_size, sampler=sampler, drop_last=True,
                       num_workers=job.num_workers, pin_memory=job.pin_memory, generator=job.loader_generator()),
            use_distributed_sampler=False)
        model.train()
        while step < job.max_steps and not self.should_stop:
            batches = iter(loader)   # Fabric calls sampler.set_epoch(passes so far) here
            while batch_in_epoch < batches_per_epoch and step < job.max_steps and not self.should_stop:
                window = min(job.grad_accum, batches_per_epoch - batch_in_epoch)
                for i in range(window):
                    x, y = next(batches)
                    skip_sync = job.distributed and i < window - 1
                    with fabric.no_backward_sync(model, enabled=skip_sync):
                        with fabric.autocast():
                            loss = self.training_loss(model, loss_fn, x, y) / window
                        fabric.backward(loss)
                batch_in_epoch += window
                if job.grad_clip is not None:
                    fabric.clip_gradients(model, optimizer, **aligned_clipping(job))
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                scheduler.step()
                step += 1
                fabric.call("on_optimizer_step_end", self, job=job, model=raw_model, step=step)
                if job.should_validate(step) or self.should_stop:
                    self._validate(job, fabric, raw_model, unwrapped=True)
                if job.should_checkpoint(step):
                    at_end = batch_in_epoch == batches_per_epoch
                    state.update(step=step, epoch=epoch + at_end, batch_in_epoch=0 if at_end else batch_in_epoch,
                                 rng=capture_rng())
                    fabric.save(job.checkpoint_path(step, CKPT_SUFFIX), state)
            epoch, batch_in_epoch = epoch + 1, 0

    def _fit_defaults(self, job, fabric, model, optimizer, scheduler) -> None:
        loss_fn = job.task.loss_fn
        # evalkit's global order in a plain DataLoader; Fabric shards it itself in DDP.
        sampler = OrderedSampler(len(job.task.train_set), job.batch_size, job.seed, 0, 1)
        loader = fabric.setup_dataloaders(DataLoader(job.task.train_set, batch_size=job.batch_size,
                                                     sampler=sampler, drop_last=True,
                                                     num_workers=job.num_workers))
        state = {"model": model, "optimizer": optimizer, "scheduler": scheduler, "step": 0, "epoch": 0}
        if job.resume_from:
            self._load(job, fabric, state)
        step, epoch = state["step"], state["epoch"]
        self._start_step = step
        model.train()
        while step < job.max_steps and not self.should_stop:
            for iteration, (x, y) in enumerate(loader):
                is_accumulating = (iteration + 1) % job.grad_accum != 0
                with fabric.no_backward_sync(model, enabled=is_accumulating):
                    loss = self.training_loss(model, loss_fn, x, y) / job.grad_accum
                    fabric.backward(loss)
                if is_accumulating:
                    continue
                if job.grad_clip is not None:
                    fabric.clip_gradients(model, optimizer, max_norm=job.grad_clip)
                optimizer.step()
                optimizer.zero_grad()
                scheduler.step()
                step += 1
                fabric.call("on_optimizer_step_end", self, job=job, model=model, step=step)
                if job.should_validate(step) or self.should_stop:
                    self._validate(job, fabric, model, unwrapped=False)
                if job.should_checkpoint(step):
                    state.update(step=step, epoch=epoch)
                    fabric.save(job.checkpoint_path(step, CKPT_SUFFIX), state)
                if step >= job.max_steps or self.should_stop:
                    break
            epoch += 1

    # ------------------------------------------------------------------ where a user's own code goes
    def training_loss(self, model: torch.nn.Module, loss_fn: torch.nn.Module, x: torch.Tensor,
                      y: torch.Tensor) -> torch.Tensor:
        """One micro-batch's loss (the loop divides it for accumulation)."""
        return loss_fn(model(x), y)

    def callbacks(self, job: TrainJob) -> list:
        """Objects for `Fabric(callbacks=...)`. The loop calls their `on_optimizer_step_end(loop, job=, model=,
        step=)` after each optimizer step (and the scheduler's); one setting `loop.should_stop = True` ends training
        after that step."""
        return []

    def _load(self, job: TrainJob, fabric, state: dict) -> None:
        path = latest_checkpoint(job.resume_from, f"step_*{CKPT_SUFFIX}")
        # Our own file (written by fabric.save above): RNG states hold plain tensors, lists and ints.
        fabric.load(path, state, strict=True, weights_only=False)
        self._resumed_from = os.path.abspath(path)

    def _validate(self, job: TrainJob, fabric, model, unwrapped: bool) -> None:
        """Forward the validation split in eval mode without grad; evalkit's observers compute the metrics."""
        loader = job.val_loader() if unwrapped else fabric.setup_dataloaders(
            DataLoader(job.task.val_set, batch_size=job.batch_size, num_workers=job.num_workers))
        model.eval()
        with torch.no_grad():
            for x, _ in loader:
                if unwrapped:
                    with fabric.autocast():
                        model(x.to(fabric.device, non_blocking=True))
                else:
                    model(x)
        model.train()

    # ------------------------------------------------------------------ what Fabric reports
    def _report(self, fabric, job: TrainJob, explicit: dict) -> dict[str, Any]:
        strategy = fabric.strategy
        plugin = strategy.precision
        scaler = getattr(plugin, "scaler", None)
        report: dict[str, Any] = {
            "aligns": ALIGNS,
            "wrapper": "lightning.fabric.Fabric", "mode": self.mode, "versions": self.versions(),
            "fabric": {
                "strategy": type(strategy).__name__,
                "process_group_backend": getattr(strategy, "process_group_backend", None),
                "cluster_environment": type(strategy.cluster_environment).__name__
                if getattr(strategy, "cluster_environment", None) is not None else None,
                "launcher": type(strategy.launcher).__name__ if getattr(strategy, "launcher", None) else None,
                "creates_processes_externally": getattr(getattr(strategy, "cluster_environment", None),
                                                        "creates_processes_externally", None),
                "accelerator": type(strategy.accelerator).__name__ if strategy.accelerator else None,
                "device": str(fabric.device), "world_size": fabric.world_size, "global_rank": fabric.global_rank,
                "local_rank": fabric.local_rank, "node_rank": fabric.node_rank,
                "precision": plugin.precision, "precision_plugin": type(plugin).__name__,
                "grad_scaler": type(scaler).__name__ if scaler is not None else None,
                "loggers": [type(lg).__name__ for lg in fabric.loggers],
            },
            "loop": "written by the adapter with Fabric calls (Fabric has no loop of its own)",
            "max_steps": job.max_steps, "grad_accum": job.grad_accum, "grad_clip": job.grad_clip,
            "val_every": job.val_every, "ckpt_every": job.ckpt_every, "start_step": self._start_step,
            "resumed_from": getattr(self, "_resumed_from", None), "resume_mechanism": "fabric.save / fabric.load",
            "monkeypatching": "none",
        }
        if self.mode == "aligned":
            report["explicit_settings"] = explicit
        else:
            report["known_deviations"] = [
                "loss divided by grad_accum also where an epoch's leftover batches spill into the next window",
                "loss computed outside autocast on the fp32 output Fabric returns",
                "Fabric's DistributedSampler in DDP",
                "clip_gradients(error_if_nonfinite=True by default) raises on a non-finite norm: with fp16 on "
                "CUDA the first overflow, which GradScaler would skip, ends the run",
                "checkpoint holds no RNG state and no data position: a resumed run's data order starts again "
                "at Fabric's first pass (set_epoch(0))",
                "checkpoint holds no GradScaler state (it lives in the precision plugin): a resumed fp16 run "
                "restarts the loss scale at 65536",
            ]
        return report
