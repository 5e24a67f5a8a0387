"""PyTorch-Ignite: an `Engine` with Ignite's handlers on an evalkit task.

Ignite is a small event engine: the update step is user code, and Ignite contributes the run loop, events
and event filters, handlers (`Checkpoint`/`DiskSaver`, `LRScheduler`, metrics, an evaluator engine) and
`ignite.distributed` (`idist.Parallel`, `auto_model`, `auto_optim`, `auto_dataloader`). Nothing of Ignite is
monkeypatched.

Processes: `idist.Parallel(backend)` run under evalkit's torch elastic variables joins the process group
(gloo on CPU, NCCL on CUDA) and never spawns (no `nproc_per_node`). At world size 1 no backend is given,
as the baseline initialises no process group for one process.

Modes
- `aligned` (`explicit_settings` in the effective config):
  * step units: one Engine iteration = one optimizer step. The Engine's data is `_Windows`: evalkit's
    per-rank micro-batches (`job.train_loader(epoch, start_batch)`) grouped into accumulation windows of
    `grad_accum` micro-batches, the last window of an epoch shorter, exactly as the baseline cuts them;
    `epoch_length` = windows per epoch, `max_iters = max_steps`; validation and checkpoint cadence are
    `Events.ITERATION_COMPLETED(event_filter=...)` on the optimizer-step count;
  * the update function (Ignite's documented way to customise training) follows the baseline: autocast
    per `job.precision`, each micro-batch loss divided by the window's actual size, DDP `no_sync` on all
    but the last micro-batch, `GradScaler` (torch defaults; fp16 on CPU works with torch.amp, so it is
    run, not refused), unscale then clip the global L2 norm, step, `zero_grad(set_to_none=True)`;
  * scheduler: evalkit's torch scheduler stepped by an `ITERATION_COMPLETED` handler (once per optimizer
    step, also when GradScaler skipped the step), registered before validation and checkpointing, so the
    order within a step is the baseline's;
  * validation: `create_supervised_evaluator` on the unwrapped model (eval mode, no_grad, autocast through
    `model_fn`) over `job.val_loader()`, with Ignite's own `Loss` metric (synchronised over ranks) kept in
    the effective config;
  * DDP: `idist.auto_model` (DDP with `find_unused_parameters=False`, buffers broadcast) only when
    world size > 1 (at world size 1 `auto_model` would wrap `DataParallel` on a multi-GPU host);
    `idist.auto_optim` (a no-op for native torch distributed);
  * seeding: none (Ignite's `manual_seed`/`DeterministicEngine` are not used: evalkit seeded the process);
  * checkpoints: `Checkpoint({model, optimizer, lr_scheduler, scaler, trainer, rng}, DiskSaver(ckpt_dir,
    atomic=True), filename_pattern="step_{global_step:08d}.pt", n_saved=None)`; `rng` is a small stateful
    object holding evalkit's RNG capture (torch/python/numpy/CUDA). Resume: `Checkpoint.load_objects`
    (Ignite reads the file with `torch.load(weights_only=True)`), the Engine state restores the iteration;
    a plain `Engine` does not fast-forward its data on resume, so `_Windows` starts at the saved position
    (derived from the restored iteration).
- `defaults`: Ignite's quick start: `idist.Parallel`, `idist.auto_model`, `idist.auto_optim`,
  `idist.auto_dataloader(train_set, batch_size=batch_size * world_size, shuffle=True)` (auto_dataloader
  divides the batch by the world size), `create_supervised_trainer(model, optimizer, loss_fn, device,
  gradient_accumulation_steps, amp_mode="amp" for mixed precision, scaler=True for fp16)`, evalkit's
  scheduler through Ignite's `LRScheduler` handler on `ITERATION_STARTED` (as Ignite documents it; it sets
  the LR from `get_lr()` without calling `scheduler.step()`, once per micro-batch), an evaluator on
  `auto_dataloader(val_set)`, iteration = micro-batch (`max_iters = max_steps * grad_accum`, cadences in
  micro-batches), a `Checkpoint` of model, optimizer, scheduler handler and trainer. Ignite's
  `amp_mode="amp"` autocasts with device "cuda" (fp16), so on CPU it warns and runs fp32 and on CUDA a
  bf16 request runs fp16, without loss scaling; evalkit's observers flag both. `create_supervised_trainer` has no
  gradient-clipping option, so a job with `train.grad_clip` set trains unclipped in defaults mode (not refused):
  its report says so (`known_deviations`) and the semantic probe's clip job names it (`clip.not_applied`).

Known differences from the baseline (`known_deviations`): none in aligned mode beyond what the effective
config lists; in defaults mode the loss is divided by `grad_accum` in every window and windows are counted
over the whole run (they do not restart at epoch boundaries), there is no `no_sync` under DDP, the scheduler
moves per micro-batch, a resumed run restarts its epoch's data from the beginning, and resuming a run that
already reached `max_iters` starts it again from iteration 0 (Ignite's `Engine.run` on a finished state).
"""
from __future__ import annotations

import math
import os
import re
from contextlib import nullcontext
from typing import Any

import torch

from evalkit.checkpoint import CorruptCheckpoint, capture_rng, restore_rng
from evalkit.contract import TrainJob, WrapperAdapter

_CKPT = re.compile(r"(?:step|checkpoint)_(\d+)\.pt$")
# The aligned GradScaler's settings: torch's defaults, as the baseline's scaler (spelled out for the report).
GRAD_SCALER = {"init_scale": 65536.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 2000}


# The setting that aligns each kind of semantic finding (probe codes, or their family before the dot), reported as
# `aligns` in the effective config; the semantic probe names it beside each finding.
ALIGNS = {
    "lr": "a custom update function over windows of grad_accum micro-batches with scheduler.step() once per "
          "optimizer step (the LRScheduler handler on ITERATION_STARTED sets the LR per micro-batch)",
    "sched": "a custom update function with scheduler.step() once per optimizer step",
    "order": "idist.auto_dataloader(dataset, sampler=evalkit's sampler, shuffle=False)",
    "window": "a custom update function whose windows restart at each epoch (create_supervised_trainer counts "
              "gradient_accumulation_steps over the whole run)",
    "clip.not_applied": "a custom update function calling clip_grad_norm_ (create_supervised_trainer cannot clip)",
}

class _RNGState:
    """evalkit's RNG capture as a stateful object Ignite's `Checkpoint` can save and load."""

    def state_dict(self) -> dict:
        return capture_rng()

    def load_state_dict(self, state: dict) -> None:
        restore_rng(state)


class _Windows:
    """One rank's accumulation windows in evalkit's order: each item is a list of up to `grad_accum`
    micro-batches; windows restart at each epoch and the epoch's last window may be shorter. Each
    `iter()` walks one epoch (from `start_batch` the first time) and advances to the next."""

    def __init__(self, job: TrainJob, epoch: int = 0, start_batch: int = 0):
        self.job, self.epoch, self.start_batch = job, epoch, start_batch
        self.batches_per_epoch = job.train_sampler().batches_per_epoch
        self.windows_per_epoch = math.ceil(self.batches_per_epoch / job.grad_accum)

    def __len__(self) -> int:
        return self.windows_per_epoch

    def __iter__(self):
        epoch, start = self.epoch, self.start_batch
        self.epoch, self.start_batch = epoch + 1, 0
        return self._walk(epoch, start)

    def _walk(self, epoch: int, start: int):
        batches = iter(self.job.train_loader(epoch, start_batch=start))
        position = start
        while position < self.batches_per_epoch:
            size = min(self.job.grad_accum, self.batches_per_epoch - position)
            yield [next(batches) for _ in range(size)]
            position += size


def resolve_checkpoint(path: str) -> str:
    """`path` itself when it is a file; else the highest-step Ignite checkpoint inside the directory."""
    if os.path.isfile(path):
        return path
    found = [f for f in os.listdir(path) if _CKPT.search(f)] if os.path.isdir(path) else []
    if not found:
        raise CorruptCheckpoint(f"no Ignite checkpoint (step_*.pt / checkpoint_*.pt) in {path}; check resume_from")
    return os.path.join(path, max(found, key=lambda f: int(_CKPT.search(f).group(1))))


class IgniteAdapter(WrapperAdapter):
    distributions = ("pytorch-ignite", "torch")
    preload_modules = ("ignite.engine", "ignite.handlers", "ignite.metrics", "ignite.distributed")

    def __init__(self, mode: str = "aligned", options: dict[str, Any] | None = None):
        super().__init__(mode, options)
        self._handlers: list[dict[str, str]] = []
        self._val_history: list[dict[str, Any]] = []

    def fit(self, job: TrainJob) -> None:
        import ignite.distributed as idist

        backend = ("gloo" if job.device.type == "cpu" else "nccl") if job.distributed else None
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            # A process group someone else created (a launcher, a platform, evalkit's distributed.init_by): idist
            # adopts it through its documented `sync()` and Parallel must not create a second one.
            idist.sync()
            backend = None
        with idist.Parallel(backend=backend) as parallel:
            parallel.run(self._run_aligned if self.mode == "aligned" else self._run_defaults, job)

    # ------------------------------------------------------------------ aligned
    def _run_aligned(self, local_rank: int, job: TrainJob) -> None:
        import ignite.distributed as idist
        from ignite.engine import Engine, Events, create_supervised_evaluator
        from ignite.handlers import Checkpoint, DiskSaver
        from ignite.metrics import Loss

        device = job.device
        model = job.task.model.to(device)
        net = idist.auto_model(model) if job.distributed else model
        optimizer = idist.auto_optim(job.make_optimizer(model.parameters()))
        scheduler = job.make_scheduler(optimizer)
        scaler_settings = {"enabled": job.precision.grad_scaler, **GRAD_SCALER}
        scaler = torch.amp.GradScaler(device.type, **scaler_settings)
        loss_fn = self.loss_function(job)

        def update(engine: Engine, window: list) -> torch.Tensor:
            net.train()
            size = len(window)
            total = torch.zeros((), device=device)
            for i, (x, y) in enumerate(window):
                x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
                sync = nullcontext() if i == size - 1 or not job.distributed else net.no_sync()
                with sync:
                    with job.precision.autocast(device):
                        loss = loss_fn(net(x), y) / size
                    scaler.scale(loss).backward()
                total += loss.detach()
            if job.grad_clip is not None:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), job.grad_clip)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
            return total

        trainer = Engine(update)

        def step_scheduler(engine: Engine) -> None:
            scheduler.step()

        def run_validation(engine: Engine) -> None:
            state = evaluator.run(job.val_loader())
            self._val_history.append({"step": engine.state.iteration,
                                      **{k: float(v) for k, v in state.metrics.items()}})

        evaluator = create_supervised_evaluator(
            model, metrics={"loss": Loss(job.task.loss_fn)}, device=device, non_blocking=True,
            model_fn=lambda m, x: _autocast_call(job, m, x), model_transform=lambda out: out.float())
        to_save = {"model": model, "optimizer": optimizer, "lr_scheduler": scheduler, "scaler": scaler,
                   "trainer": trainer, "rng": _RNGState()}
        checkpoint = Checkpoint(to_save, DiskSaver(job.ckpt_dir, require_empty=False, create_dir=True, atomic=True),
                                filename_pattern="step_{global_step:08d}.{ext}", n_saved=None,
                                global_step_transform=lambda engine, _: engine.state.iteration)
        validate_at = Events.ITERATION_COMPLETED(event_filter=lambda _, it: job.should_validate(it))
        checkpoint_at = Events.ITERATION_COMPLETED(event_filter=lambda _, it: job.should_checkpoint(it))
        self._attach(trainer, Events.ITERATION_COMPLETED, step_scheduler, "torch scheduler.step() per optimizer step")
        self._attach(trainer, validate_at, run_validation, "evaluator.run(job.val_loader()) at job.should_validate")
        self._attach(trainer, checkpoint_at, checkpoint, "Checkpoint at job.should_checkpoint")
        self.attach_handlers(job, trainer, model)

        data = _Windows(job)
        step = 0
        if job.resume_from:
            path = resolve_checkpoint(job.resume_from)
            Checkpoint.load_objects(to_load=to_save, checkpoint=_load_on_cpu(path))
            step = trainer.state.iteration
            data = _Windows(job, step // data.windows_per_epoch, (step % data.windows_per_epoch) * job.grad_accum)
            self._effective["resumed_from"] = os.path.abspath(path)
        run_arguments = {"epoch_length": data.windows_per_epoch, "max_iters": job.max_steps}   # trainer.run's
        self._record(job, trainer, evaluator, checkpoint, data, net, scaler, step, explicit={
            "engine_iteration": "one optimizer step (a window of grad_accum micro-batches, shorter at epoch end)",
            **run_arguments,
            "data": "evalkit's per-rank order via job.train_loader(epoch, start_batch), grouped into windows",
            "loss_division": "by the window's actual size", "ddp_no_sync": "all but the window's last micro-batch",
            "grad_scaler": scaler_settings,
            "clipping": "scaler.unscale_ then clip_grad_norm_(global L2) before the optimizer step",
            "autocast": job.precision.name, "scheduler": "torch scheduler.step() on ITERATION_COMPLETED, first handler",
            "validation": "create_supervised_evaluator(unwrapped model, model_fn=autocast) on job.val_loader(), "
                          "at job.should_validate(iteration)",
            "checkpoint": "Checkpoint(model, optimizer, lr_scheduler, scaler, trainer, rng) at "
                          "job.should_checkpoint(iteration), DiskSaver(atomic=True), n_saved=None",
            "auto_model": "DDP(find_unused_parameters=False) only at world size > 1",
            "process_group": backend_name(job), "seeding": "none (evalkit seeded the process)",
        })
        if step < job.max_steps:
            trainer.run(data, **run_arguments)
        if job.distributed:
            idist.barrier()
        self._finish(trainer, checkpoint)

    # ------------------------------------------------------------------ defaults
    def _run_defaults(self, local_rank: int, job: TrainJob) -> None:
        import ignite.distributed as idist
        from ignite.engine import Events, create_supervised_evaluator, create_supervised_trainer
        from ignite.handlers import Checkpoint, DiskSaver, LRScheduler
        from ignite.metrics import Loss

        device = idist.device()
        model = idist.auto_model(job.task.model)
        optimizer = idist.auto_optim(job.make_optimizer(model.parameters()))
        scheduler = job.make_scheduler(optimizer)
        loss_fn = self.loss_function(job)
        world = idist.get_world_size()
        train_loader = idist.auto_dataloader(job.task.train_set, batch_size=job.batch_size * world, shuffle=True,
                                             num_workers=job.num_workers)
        val_loader = idist.auto_dataloader(job.task.val_set, batch_size=job.batch_size * world, shuffle=False,
                                           num_workers=job.num_workers)
        amp_mode = "amp" if job.precision.autocast_dtype is not None else None
        trainer = create_supervised_trainer(model, optimizer, loss_fn, device=device,
                                            gradient_accumulation_steps=job.grad_accum, amp_mode=amp_mode,
                                            scaler=bool(job.precision.grad_scaler))
        evaluator = create_supervised_evaluator(model, metrics={"loss": Loss(job.task.loss_fn)}, device=device,
                                                amp_mode=amp_mode)
        lr_handler = LRScheduler(scheduler)
        max_iters = job.max_steps * job.grad_accum

        def run_validation(engine) -> None:
            state = evaluator.run(val_loader)
            self._val_history.append({"iteration": engine.state.iteration,
                                      **{k: float(v) for k, v in state.metrics.items()}})

        def every(n_steps: int):
            n = (n_steps or job.max_steps) * job.grad_accum
            return lambda _, it: it % n == 0 or it == max_iters

        to_save = {"model": model, "optimizer": optimizer, "trainer": trainer, "lr_scheduler": lr_handler}
        checkpoint = Checkpoint(to_save, DiskSaver(job.ckpt_dir, require_empty=False), n_saved=None)
        self._attach(trainer, Events.ITERATION_STARTED, lr_handler, "ignite LRScheduler(torch scheduler)")
        self._attach(trainer, Events.ITERATION_COMPLETED(event_filter=every(job.val_every)), run_validation,
                     "evaluator.run(val_loader) every val_every*grad_accum iterations and at the end")
        self._attach(trainer, Events.ITERATION_COMPLETED(event_filter=every(job.ckpt_every)), checkpoint,
                     "Checkpoint every ckpt_every*grad_accum iterations and at the end")
        self.attach_handlers(job, trainer, model)
        start = 0
        if job.resume_from:
            path = resolve_checkpoint(job.resume_from)
            Checkpoint.load_objects(to_load=to_save, checkpoint=_load_on_cpu(path))
            start = trainer.state.iteration
            self._effective["resumed_from"] = os.path.abspath(path)
        scaler = getattr(trainer.state, "scaler", None)      # create_supervised_trainer's own GradScaler
        self._record(job, trainer, evaluator, checkpoint, train_loader, model, scaler, start // job.grad_accum,
                     explicit=None)
        trainer.run(train_loader, max_iters=max_iters)   # as a user would: a finished state restarts at 0
        self._finish(trainer, checkpoint)

    # ------------------------------------------------------------------ where a user's own code goes
    def loss_function(self, job: TrainJob):
        """The training loss `loss_fn(y_pred, y)` (Ignite's argument of `create_supervised_trainer`); validation
        always measures the task's loss."""
        return job.task.loss_fn

    def attach_handlers(self, job: TrainJob, trainer, model: torch.nn.Module) -> None:
        """Event handlers of the user's own, attached to the training engine after the adapter's (`model` is the
        unwrapped one). An engine iteration is one optimizer step in aligned mode, one micro-batch in defaults."""

    # ------------------------------------------------------------------ helpers
    def _attach(self, engine, event, handler, what: str) -> None:
        engine.add_event_handler(event, handler)
        name = getattr(event, "name", None) or str(event)
        filtered = getattr(event, "filter", None) is not None
        self._handlers.append({"event": f"{name}{' (filtered)' if filtered else ''}",
                               "handler": getattr(handler, "__name__", type(handler).__name__), "what": what,
                               "registered": bool(engine.has_event_handler(handler))})

    def _finish(self, trainer, checkpoint) -> None:
        self._effective["final_state"] = {"iteration": trainer.state.iteration, "epoch": trainer.state.epoch,
                                          "epoch_length": trainer.state.epoch_length,
                                          "max_iters": trainer.state.max_iters,
                                          "max_epochs": trainer.state.max_epochs}
        self._effective["engine_state_dict"] = dict(trainer.state_dict())
        self._effective["last_checkpoint"] = str(checkpoint.last_checkpoint) if checkpoint.last_checkpoint else None
        self._effective["ignite_validation"] = self._val_history

    def _record(self, job: TrainJob, trainer, evaluator, checkpoint, data, net, scaler, start_step: int,
                explicit: dict | None) -> None:
        import ignite
        import ignite.distributed as idist

        report: dict[str, Any] = {
            "aligns": ALIGNS,
            "wrapper": "pytorch-ignite", "version": ignite.__version__, "mode": self.mode,
            "idist": {"backend": idist.backend(), "world_size": idist.get_world_size(), "rank": idist.get_rank(),
                      "local_rank": idist.get_local_rank(), "nproc_per_node": idist.get_nproc_per_node(),
                      "device": str(idist.device()), "model_name": idist.model_name()},
            "trainer_engine": {"class": type(trainer).__name__,
                               "process_function": ("adapter update(): one accumulation window per iteration"
                                                    if explicit is not None else
                                                    "create_supervised_trainer: one micro-batch per iteration"),
                               "state": repr(trainer.state)},
            "evaluator_metrics": sorted(getattr(evaluator.state, "metrics", {}) or []) or ["loss"],
            "attached_handlers": self._handlers,
            "checkpoint": {"save_handler": type(checkpoint.save_handler).__name__,
                           "dirname": str(getattr(checkpoint.save_handler, "dirname", "")),
                           "n_saved": checkpoint.n_saved, "filename_pattern": checkpoint.filename_pattern,
                           "objects": sorted(checkpoint.to_save)},
            "model_wrapper": type(net).__name__,
            "grad_scaler": bool(scaler is not None and scaler.is_enabled()),
            "precision": job.precision.name, "grad_accum": job.grad_accum, "grad_clip": job.grad_clip,
            "max_steps": job.max_steps, "val_every": job.val_every, "ckpt_every": job.ckpt_every,
            "start_step": start_step, "world_size": job.world_size,
            "checkpoint_loading": "torch.load(path, map_location='cpu', weights_only=True), then "
                                  "Checkpoint.load_objects copies each state onto its object's device",
        }
        if explicit is None:
            report["known_deviations"] = [
                *([f"defaults: create_supervised_trainer (quick start) has no gradient clipping: train.grad_clip="
                   f"{job.grad_clip} is not applied"] if job.grad_clip is not None else []),
                "defaults: iteration = micro-batch; accumulation windows counted over the whole run (not reset at "
                "epoch ends), loss divided by grad_accum, no DDP no_sync",
                "defaults: LRScheduler handler on ITERATION_STARTED sets the LR once per micro-batch from get_lr() "
                "(scheduler.step() is never called)",
                "defaults: amp_mode='amp' autocasts with device 'cuda' and its default dtype fp16: fp32 on CPU; "
                "on CUDA a bf16 request runs fp16 without loss scaling (scaler=True only for fp16_mixed)",
                "defaults: create_supervised_trainer's GradScaler is not among the checkpointed objects: a resumed "
                "fp16 run restarts the loss scale at 65536",
                "defaults: idist.auto_model wraps the model in DataParallel when more than one GPU is visible at "
                "world size 1 (evalkit's launcher limits CUDA_VISIBLE_DEVICES to the ranks' GPUs)",
                "defaults: shuffle=True (DistributedSampler when distributed), not evalkit's order",
                "defaults: a resumed run restarts the interrupted epoch's data from its beginning; RNG not saved",
                "defaults: Engine.run on a state that already reached max_iters starts a new run from iteration 0",
            ]
        else:
            report["explicit_settings"] = explicit
            report["known_deviations"] = []
        self._effective.update(report)


def _load_on_cpu(path: str) -> dict:
    """The checkpoint's objects on the CPU: rank 0 saved CUDA tensors of cuda:0, which every rank would
    otherwise materialise there; the RNG states must be CPU tensors anyway."""
    return torch.load(path, map_location="cpu", weights_only=True)


def _autocast_call(job: TrainJob, model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    with job.precision.autocast(job.device):
        return model(x)


def backend_name(job: TrainJob) -> str | None:
    return ("gloo" if job.device.type == "cpu" else "nccl") if job.distributed else None
