"""Lightning `Fabric` on an evalkit task (`trainer=fabric`).

Fabric is a toolkit, not a loop: the adapter writes the loop and Fabric owns, through its documented API, the
processes (`Fabric(...)`, `fabric.launch()`, joining the ranks evalkit starts), device placement and DDP
(`fabric.setup`), data loading, precision, gradient-sync control, clipping and checkpoints. No monkeypatching.
- `aligned`: a loop with the baseline's semantics exactly, so a resumed run continues bit for bit.
- `defaults`: the Fabric pages of the installed version line for line, where the pages leave a choice the simplest
  reading (`quick_start`, `departures`).
What no documented option aligns: `DEVIATIONS`. The full record: docs/wrappers/fabric.md.
"""
from __future__ import annotations

import os
from typing import Any

import torch
from torch.utils.data import DataLoader

from evalkit.adapters.calls import Call, built
from evalkit.contract import Departure, Deviation, QuickStartPage, TrainJob, UnsupportedCombination, WrapperAdapter
from evalkit.contract.checkpoint import capture_rng, latest_checkpoint, restore_rng
from evalkit.tasks.order import OrderedSampler

PRECISIONS = {"fp32": "32-true", "bf16_mixed": "bf16-mixed", "fp16_mixed": "16-mixed"}
CKPT_SUFFIX = ".ckpt"
PRECISION_DOCS = "https://lightning.ai/docs/fabric/stable/api/fabric_args.html#precision"   # the values it takes
FABRIC_VERSION = "2.6.6"           # the installed lightning whose Fabric pages defaults mode follows
FABRIC_DOCS = f"https://lightning.ai/docs/fabric/{FABRIC_VERSION}"
PAGE_STRATEGY = "ddp"              # Fabric(accelerator="cuda", devices=8, strategy="ddp") on the Convert page
VALIDATE_EVERY_N_EPOCH = 1         # the page's `if epoch % validate_every_n_epoch == 0` (it leaves n to the user)


# The setting that aligns each kind of semantic finding (probe codes, or their family before the dot), reported as
# `aligns` in the effective config; the semantic probe names it beside each finding.
ALIGNS = {
    "window.first_single": "count windows from the first batch: is_accumulating = (iteration + 1) % grad_accum != 0 "
                           "(the page's iteration % 8 != 0 steps on each epoch's first batch alone)",
    "window.short_merged": "step on an epoch's last batch too: is_accumulating = (iteration + 1) % grad_accum != 0 "
                           "and iteration + 1 < len(dataloader)",
    "window.spans_epochs": "step on an epoch's last batch too: is_accumulating = (iteration + 1) % grad_accum != 0 "
                           "and iteration + 1 < len(dataloader)",
    "loss.window_summed": "divide each micro-batch loss by its window's size before fabric.backward(loss)",
    "window.short_underscaled": "divide each loss by the window's actual size, not grad_accum",
    "micro.train_mode": "model.train() again after each validation (the page's validate() leaves the model in "
                        "eval mode)",
    "batch.partial": "DataLoader(..., drop_last=True)",
    "val.cadence": "validate in the loop after the optimizer steps the run asks for (if step % val_every == 0 or "
                   "step == max_steps: validate(...)): the loop is the user's code",
    "order": "fabric.setup_dataloaders(loader, use_distributed_sampler=False) over evalkit's sampler",
    "val.repeated": "fabric.setup_dataloaders(val_loader, use_distributed_sampler=False) over each rank's own shard",
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


DEVIATIONS = (   # defaults mode: what the pages' loop does differently from the baseline
    Deviation("val.cadence", "Fabric has no setting for a validation cadence (the loop is the user's code): the "
              "page validates after every validate_every_n_epoch-th epoch (n left to the user: 1), also after the "
              "last epoch cut short at max_steps, not every val_every optimizer steps"),
    Deviation("val.repeated", "at world size > 1 fabric.setup_dataloaders' DistributedSampler pads the validation "
              "set to even out the ranks: the repeated samples are run and counted"),
    Deviation("loss.window_summed", "each micro-batch loss goes to fabric.backward undivided: a step's gradients "
              "are the sum over its micro-batches, not their mean"),
    Deviation("window", "accumulation windows counted on each epoch's own iteration (iteration % grad_accum != 0): "
              "an epoch's first window is its first batch alone, and its leftover batches join the next epoch's "
              "first batch in one window across the epoch boundary"),
    Deviation("micro.train_mode", "training in eval mode once the val loader has first run: the page's evaluation "
              "function calls model.eval() and nothing calls model.train() again"),
    Deviation("order", "DataLoader(dataset) in its dataset order (no shuffle); Fabric's "
              "DistributedSampler(shuffle=False) in DDP interleaves that order over the ranks and pads it with "
              "repeated samples"),
    Deviation("batch.partial", "each epoch's incomplete last batch kept (no drop_last)"),
    Deviation("precision.loss_fp32", "loss computed outside autocast on the fp32 output Fabric returns"),
    Deviation("clip.nonfinite_raises", "clip_gradients(error_if_nonfinite=True by default) raises on a non-finite "
              "norm: with fp16 on CUDA the first overflow, which GradScaler would skip, ends the run"),
    Deviation("resume.order_restarts", "checkpoint holds no RNG state and no data position: a resumed run's data "
              "order starts again at Fabric's first pass (set_epoch(0))"),
    Deviation("resume.scaler_not_saved", "checkpoint holds no GradScaler state (it lives in the precision plugin): a "
              "resumed fp16 run restarts the loss scale at 65536"),
)


class FabricAdapter(WrapperAdapter):
    """`trainer=fabric`: a loop written with Lightning Fabric (see the module docstring)."""
    option_names = ()   # trainer.options: none (a key is refused, with the nearest: evalkit.contract.options)

    deviations = DEVIATIONS
    aligns = ALIGNS
    quick_start = (
        QuickStartPage(f"{FABRIC_DOCS}/fundamentals/convert.html", FABRIC_VERSION,
                       follows="'All steps combined': Fabric(accelerator, devices, strategy='ddp'), fabric.launch(), "
                               "model, optimizer = fabric.setup(model, optimizer), dataloader = "
                               "fabric.setup_dataloaders(DataLoader(dataset)), model.train(), the epoch loop with "
                               "fabric.backward(loss) and optimizer.step()"),
        QuickStartPage(f"{FABRIC_DOCS}/advanced/gradient_accumulation.html", FABRIC_VERSION,
                       follows="the no_backward_sync version: is_accumulating = iteration % grad_accum != 0, "
                               "fabric.backward(loss) on the undivided loss, optimizer.step() and zero_grad() when "
                               "not accumulating"),
        QuickStartPage(f"{FABRIC_DOCS}/api/fabric_methods.html", FABRIC_VERSION,
                       follows="'setup' (the scheduler built beside the optimizer, not passed to setup under DDP) "
                               "and 'clip_gradients' (max_norm, only when the run sets train.grad_clip)"),
        QuickStartPage(f"{FABRIC_DOCS}/fundamentals/code_structure.html", FABRIC_VERSION,
                       follows="'Training, Validation, Testing': validate(fabric, model, val_dataloader) with "
                               "model.eval(), at the run's val_every cadence"),
        QuickStartPage(f"{FABRIC_DOCS}/guide/checkpoint/checkpoint.html", FABRIC_VERSION,
                       follows="state dict of model, optimizer and metadata, fabric.save(path, state) and "
                               "fabric.load(path, state)"),
    )
    departures = (
        Departure("model = job.task.model instead of the page's Transformer(vocab_size=...)",
                  "evalkit built, seeded and hooked this instance, the same for every adapter", "model"),
        Departure("evalkit's train and validation datasets instead of the page's WikiText2(), and the task's loss "
                  "module (loss = job.task.loss_fn(model(x), y)) instead of nll_loss(output, target.view(-1))",
                  "the task owns its data and loss (sample ids ride on the dataset; the loss module is hooked)",
                  "data"),
        Departure("validate()'s forwards run under torch.no_grad() (the page's validate() does not disable grad)",
                  "evalkit tells validation forwards from training micro-batches by grad mode; the outputs are "
                  "the same", "observation"),
        Departure("fabric.call('on_optimizer_step_end', ...) after each optimizer step (a no-op: no callbacks in "
                  "defaults) and a should_stop check",
                  "evalkit's customization hook for user callbacks, the same in every mode", "observation"),
    )

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
            arguments = self.quick_start_arguments(job)
            return Fabric(**arguments, callbacks=self.callbacks(job)), None, arguments

        if precision == "16-mixed" and job.device.type == "cpu":
            raise UnsupportedCombination(
                "fabric turns precision='16-mixed' into bf16-mixed on CPU; fp16_mixed cannot run on CPU",
                UnsupportedCombination.SUBSTITUTION)
        backend = "nccl" if job.device.type == "cuda" else "gloo"
        arguments: dict[str, Any] = {   # Fabric(...)'s arguments, reported as they are under explicit_settings
            "accelerator": accelerator, "devices": job.ranks_per_node, "num_nodes": job.nnodes,
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
                            "window size (a token task: loss x its tokens x world size / the window's tokens on all "
                            "ranks); no_backward_sync on all but the window's last backward",
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

    @staticmethod
    def quick_start_arguments(job: TrainJob) -> dict[str, Any]:
        """`Fabric(...)`'s arguments in defaults mode: the Convert page's, with evalkit's hardware, world size and
        precision translated into them (reported as `quick_start_arguments`)."""
        return {"accelerator": "cuda" if job.device.type == "cuda" else "cpu", "devices": job.ranks_per_node,
                **({"num_nodes": job.nnodes} if job.nnodes > 1 else {}),      # the multi-node page's Fabric(...)
                "strategy": PAGE_STRATEGY, "precision": PRECISIONS[job.precision.name]}

    # ------------------------------------------------------------------ fit
    def fit(self, job: TrainJob) -> None:
        self.should_stop = False     # set by a callback (fabric.call) to end training after the current step
        fabric, scaler, explicit = self._fabric(job)
        fabric.launch()   # under its launcher's variables (LOCAL_RANK set): joins the ranks, spawns nothing
        raw_model = job.task.model
        optimizer = job.make_optimizer(raw_model.parameters())
        scheduler = job.make_scheduler(optimizer)
        # train.compile: "Speed up models by compiling them": torch.compile(model), then fabric.setup (which strips
        # the compiled wrapper and applies it again over its own)
        model, optimizer = fabric.setup(torch.compile(raw_model) if job.compile else raw_model, optimizer)
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
                micro = [next(batches) for _ in range(window)]
                weights = job.token_weights([y for _, y in micro])    # a token task: its window's token mean
                for i, (x, y) in enumerate(micro):
                    skip_sync = job.distributed and i < window - 1
                    with fabric.no_backward_sync(model, enabled=skip_sync):
                        with fabric.autocast():
                            loss = self.training_loss(model, loss_fn, x, y)
                            loss = loss / window if weights is None else loss * weights[i]
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
                    self._validate(job, fabric, raw_model)
                if job.should_checkpoint(step):
                    at_end = batch_in_epoch == batches_per_epoch
                    state.update(step=step, epoch=epoch + at_end, batch_in_epoch=0 if at_end else batch_in_epoch,
                                 rng=capture_rng())
                    fabric.save(job.checkpoint_path(step, CKPT_SUFFIX), state)
            epoch, batch_in_epoch = epoch + 1, 0

    def _fit_defaults(self, job, fabric, model, optimizer, scheduler) -> None:
        """The pages' loop (docs/wrappers/fabric.md, defaults mode)."""
        loss_fn = job.task.loss_fn
        dataloader = fabric.setup_dataloaders(DataLoader(job.task.train_set, batch_size=job.batch_size,
                                                         num_workers=job.num_workers))
        val_dataloader = fabric.setup_dataloaders(DataLoader(job.task.val_set, batch_size=job.batch_size,
                                                             num_workers=job.num_workers))
        state = {"model": model, "optimizer": optimizer, "scheduler": scheduler, "step": 0, "epoch": 0}
        if job.resume_from:
            self._load(job, fabric, state)
        step, epoch = state["step"], state["epoch"]
        self._start_step = step
        model.train()
        while step < job.max_steps and not self.should_stop:
            for iteration, (x, y) in enumerate(dataloader):
                is_accumulating = iteration % job.grad_accum != 0
                with fabric.no_backward_sync(model, enabled=is_accumulating):
                    loss = self.training_loss(model, loss_fn, x, y)
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
                if job.should_checkpoint(step):
                    state.update(step=step, epoch=epoch)
                    fabric.save(job.checkpoint_path(step, CKPT_SUFFIX), state)
                if step >= job.max_steps or self.should_stop:
                    break
            if epoch % VALIDATE_EVERY_N_EPOCH == 0:      # the page's validation, after its train(...) returns
                self._validate_defaults(model, val_dataloader)
            epoch += 1

    @staticmethod
    def _validate_defaults(model, val_dataloader) -> None:
        """The page's `validate(fabric, model, dataloader)`: `model.eval()` and a forward per batch; it leaves the
        model in eval mode, as the page does. `no_grad` is evalkit's (a departure: observation)."""
        model.eval()
        with torch.no_grad():
            for x, _ in val_dataloader:
                model(x)

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

    def _validate(self, job: TrainJob, fabric, model) -> None:
        """Aligned: forward evalkit's validation shard through evalkit's model in eval mode without grad, under
        `fabric.autocast()`; evalkit's observers compute the metrics."""
        loader = job.val_loader()
        model.eval()
        with torch.no_grad():
            for x, _ in loader:
                with fabric.autocast():
                    model(x.to(fabric.device, non_blocking=True))
        model.train()

    # ------------------------------------------------------------------ what Fabric reports
    def _report(self, fabric, job: TrainJob, explicit: dict) -> dict[str, Any]:
        strategy = fabric.strategy
        plugin = strategy.precision
        scaler = getattr(plugin, "scaler", None)
        report: dict[str, Any] = {
            "wrapper": "lightning.fabric.Fabric",
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
            self.explicit_settings = explicit
        else:
            report["quick_start_arguments"] = explicit
            self.record_deviations(*(d.code for d in DEVIATIONS if d.code != "val.repeated" or job.world_size > 1))
        return report
