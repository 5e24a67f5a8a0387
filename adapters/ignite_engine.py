"""PyTorch-Ignite: an `Engine` with Ignite's handlers on an evalkit task (`trainer=ignite`).

The update step is user code; Ignite contributes the run loop, events and event filters, handlers (`Checkpoint`,
`LRScheduler`, metrics, an evaluator) and `ignite.distributed`, whose `idist.Parallel` joins torchrun's ranks without
spawning. Nothing is monkeypatched.
- `aligned`: one Engine iteration is one optimizer step over `_Windows` (evalkit's micro-batches cut into the
  baseline's windows), the update function the baseline's (`explicit_settings`). A plain `Engine` does not
  fast-forward its data on resume, so `_Windows` starts at the position derived from the restored iteration.
- `defaults`: Ignite's "Getting Started" page line for line, through `ignite.distributed` (`quick_start`,
  `departures`).
Known differences: none in aligned mode; defaults mode's are `DEVIATIONS`.
The full record: docs/wrappers/ignite_engine.md.
"""
from __future__ import annotations

import math
import os
import re
from contextlib import nullcontext
from typing import Any

import torch

from evalkit.contract import Departure, Deviation, QuickStartPage, TrainJob, WrapperAdapter
from evalkit.contract.checkpoint import CorruptCheckpoint, capture_rng, restore_rng

_CKPT = re.compile(r"(?:step|checkpoint)_(\d+)\.pt$")
LOG_INTERVAL = 100        # the quick start's `log_interval`: "How many batches to wait before logging training status"
QUICK_START = (
    QuickStartPage("https://pytorch-ignite.ai/tutorials/beginner/01-getting-started/", "0.5.5",
                   "the whole page: create_supervised_trainer / two create_supervised_evaluator, log_training_loss "
                   "every log_interval iterations, log_training_results and log_validation_results on "
                   "EPOCH_COMPLETED, trainer.run(train_loader, max_epochs=...)"),
    QuickStartPage("https://pytorch-ignite.ai/tutorials/intermediate/01-cifar10-distributed/", "0.5.5",
                   "idist.Parallel, idist.device, auto_dataloader, auto_model, auto_optim: the quick start's lines "
                   "for several processes"),
    QuickStartPage("https://pytorch-ignite.ai/how-to-guides/05-gradient-accumulation/", "0.5.5",
                   "create_supervised_trainer(..., gradient_accumulation_steps=...)"),
    QuickStartPage("https://pytorch.org/ignite/v0.5.5/generated/ignite.handlers.param_scheduler.LRScheduler.html",
                   "0.5.5", "LRScheduler(torch scheduler) attached on Events.ITERATION_STARTED"),
    QuickStartPage("https://pytorch-ignite.ai/how-to-guides/11-load-checkpoint/", "0.5.5",
                   "Checkpoint({model, optimizer, trainer, ...}) and Checkpoint.load_objects to resume"),
)
DEPARTURES = (
    Departure("model = job.task.model instead of the page's Net() (ResNet18 for MNIST)", "evalkit built, seeded "
              "and hooked this instance; every arm trains the same one", "model"),
    Departure("the task's train/validation datasets in the page's DataLoader(MNIST(...), batch_size, shuffle) "
              "lines, and criterion = the task's loss module instead of nn.CrossEntropyLoss()", "the task's data "
              "carry the sample ids evalkit observes and its loss module is hooked; the same for every arm", "data"),
    Departure("val_metrics = {'loss': Loss(criterion)} without the page's Accuracy(); the log lines print the loss "
              "only", "Accuracy is the page's MNIST classification metric; the task's own metric is computed by "
              "evalkit's observers", "data"),
    Departure("no TensorboardLogger / setup_tb_logging", "evalkit records loss, LR and metrics through its own "
              "hooks; tensorboard is not among evalkit's dependencies", "observation"),
    Departure("the page's ModelCheckpoint of the 2 best models by validation accuracy is replaced by "
              "Checkpoint({model, optimizer, trainer, lr_scheduler}) at the run's checkpoint cadence",
              "evalkit's checkpoint, resume and stability checks resume from the checkpoints the run asks for; a "
              "best-by-accuracy model-only file cannot resume and the task has no accuracy", "observation"),
)
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
    "batch": "idist.auto_dataloader(dataset, sampler=evalkit's sampler, shuffle=False) (evalkit's order drops the "
             "incomplete last batch)",
    "val.cadence": "the validation handler on Events.ITERATION_COMPLETED(every=val_every * grad_accum) and "
                   "Events.COMPLETED instead of the quick start's Events.EPOCH_COMPLETED",
    "val.repeated": "idist.auto_dataloader(val_set, sampler=a sampler over each rank's own shard, without padding)",
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


def trainer_arguments(job: TrainJob) -> dict[str, Any]:
    """`create_supervised_trainer(model, optimizer, criterion, device, **...)` in defaults mode: only what the run
    asks for through its own arguments (accumulation above 1, a mixed precision, loss scaling)."""
    arguments: dict[str, Any] = {}
    if job.grad_accum != 1:
        arguments["gradient_accumulation_steps"] = job.grad_accum
    arguments.update(evaluator_arguments(job))
    if job.precision.grad_scaler:
        arguments["scaler"] = True
    return arguments


def evaluator_arguments(job: TrainJob) -> dict[str, Any]:
    """`create_supervised_evaluator(model, metrics=..., device=device, **...)` in defaults mode."""
    return {"amp_mode": "amp"} if job.precision.autocast_dtype is not None else {}


DEVIATIONS = (   # all of defaults mode: what the quick start does differently
    Deviation("clip.not_applied", "defaults: create_supervised_trainer (quick start) has no gradient clipping: "
              "train.grad_clip is not applied"),
    Deviation("window.spans_epochs", "defaults: iteration = micro-batch; gradient accumulation windows counted on "
              "the global iteration, so a window runs across an epoch end, each loss divided by grad_accum, no DDP "
              "no_sync"),
    Deviation("lr.per_micro_batch", "defaults: LRScheduler handler on ITERATION_STARTED sets the LR once per "
              "micro-batch from get_lr() (scheduler.step() is never called)"),
    Deviation("order.shuffled", "defaults: shuffle=True (when distributed: DistributedSampler(seed=0) with "
              "set_epoch(epoch - 1) at every epoch start, as the distributed tutorial's "
              "setup_common_training_handlers), not evalkit's order"),
    Deviation("batch.partial", "defaults: no drop_last at one process (the getting-started page's DataLoader): an "
              "epoch's last micro-batch may be smaller; several: drop_last=True, the distributed tutorial's"),
    Deviation("val.repeated", "defaults: at world size > 1 idist.auto_dataloader's DistributedSampler pads the "
              "validation set to even out the ranks: the repeated samples are run and counted in Loss"),
    Deviation("precision.mismatch", "defaults: amp_mode='amp' autocasts with device 'cuda' and its default dtype "
              "fp16: fp32 on CPU; on CUDA a bf16 request runs fp16 without loss scaling (scaler=True only for "
              "fp16_mixed)"),
    Deviation("resume.scaler_not_saved", "defaults: create_supervised_trainer's GradScaler is not among the "
              "checkpointed objects: a resumed fp16 run restarts the loss scale at 65536"),
    Deviation("ddp.data_parallel", "defaults: idist.auto_model wraps the model in DataParallel when more than one "
              "GPU is visible at world size 1 (evalkit's launcher limits CUDA_VISIBLE_DEVICES to the ranks' GPUs)"),
    Deviation("resume.epoch_restarts", "defaults: a resumed run restarts the interrupted epoch's data from its "
              "beginning; RNG not saved"),
    Deviation("resume.finished_run_restarts", "defaults: Engine.run on a state that already reached max_iters "
              "starts a new run from iteration 0"),
)


class IgniteAdapter(WrapperAdapter):
    option_names = ()   # trainer.options: none (a key is refused, with the nearest: evalkit.contract.options)
    deviations = DEVIATIONS
    aligns = ALIGNS
    quick_start = QUICK_START
    departures = DEPARTURES

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
        net = torch.compile(net) if job.compile else net     # train.compile: the model compiled before the engine's
        optimizer = idist.auto_optim(job.make_optimizer(model.parameters()))
        scheduler = job.make_scheduler(optimizer)
        scaler_settings = {"enabled": job.precision.grad_scaler, **GRAD_SCALER}
        scaler = torch.amp.GradScaler(device.type, **scaler_settings)
        loss_fn = self.loss_function(job)

        def update(engine: Engine, window: list) -> torch.Tensor:
            net.train()
            size = len(window)
            weights = job.token_weights([y for _, y in window])    # a token task: its window's token mean
            total = torch.zeros((), device=device)
            for i, (x, y) in enumerate(window):
                x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
                sync = nullcontext() if i == size - 1 or not job.distributed else net.no_sync()
                with sync:
                    with job.precision.autocast(device):
                        loss = loss_fn(net(x), y)
                        loss = loss / size if weights is None else loss * weights[i]
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
            "loss_division": ("by the window's actual size" if job.task.loss_terms is None else "each loss x its "
                              "target tokens x world size / the window's tokens on all ranks"),
            "ddp_no_sync": "all but the window's last micro-batch",
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
        model = torch.compile(model) if job.compile else model    # train.compile: compiled before the trainer's
        world = idist.get_world_size()
        # the distributed tutorial's training loader at several ranks: drop_last=True (one process: the page's line)
        train_loader = idist.auto_dataloader(job.task.train_set, batch_size=job.batch_size * world, shuffle=True,
                                             num_workers=job.num_workers, **({"drop_last": True} if world > 1 else {}))
        val_loader = idist.auto_dataloader(job.task.val_set, batch_size=job.batch_size * world, shuffle=False,
                                           num_workers=job.num_workers)
        optimizer = idist.auto_optim(job.make_optimizer(model.parameters()))
        criterion = self.loss_function(job)

        trainer = create_supervised_trainer(model, optimizer, criterion, device, **trainer_arguments(job))
        val_metrics = {"loss": Loss(job.task.loss_fn)}
        train_evaluator = create_supervised_evaluator(model, metrics=val_metrics, device=device,
                                                      **evaluator_arguments(job))
        val_evaluator = create_supervised_evaluator(model, metrics=val_metrics, device=device,
                                                    **evaluator_arguments(job))
        lr_scheduler = LRScheduler(job.make_scheduler(optimizer))
        max_iters = job.max_steps * job.grad_accum

        def log_training_loss(engine) -> None:
            print(f"Epoch[{engine.state.epoch}], Iter[{engine.state.iteration}] Loss: {engine.state.output:.2f}")

        def log_training_results(trainer) -> None:
            train_evaluator.run(train_loader)
            metrics = train_evaluator.state.metrics
            print(f"Training Results - Epoch[{trainer.state.epoch}] Avg loss: {metrics['loss']:.2f}")

        def log_validation_results(trainer) -> None:
            val_evaluator.run(val_loader)
            metrics = val_evaluator.state.metrics
            print(f"Validation Results - Epoch[{trainer.state.epoch}] Avg loss: {metrics['loss']:.2f}")
            self._val_history.append({"iteration": trainer.state.iteration, "epoch": trainer.state.epoch,
                                      **{k: float(v) for k, v in metrics.items()}})

        every = (job.ckpt_every or job.max_steps) * job.grad_accum
        to_save = {"model": model, "optimizer": optimizer, "trainer": trainer, "lr_scheduler": lr_scheduler}
        checkpoint = Checkpoint(to_save, DiskSaver(job.ckpt_dir, require_empty=False), n_saved=None)
        self._attach(trainer, Events.ITERATION_STARTED, lr_scheduler, "ignite LRScheduler(torch scheduler)")
        sampler = getattr(train_loader, "sampler", None)
        if world > 1 and hasattr(sampler, "set_epoch"):
            # the tutorial's setup_common_training_handlers(trainer, train_sampler=...): set_epoch(epoch - 1) on
            # every EPOCH_STARTED, so each epoch draws its own shuffle
            def distrib_set_epoch(engine) -> None:
                sampler.set_epoch(engine.state.epoch - 1)

            self._attach(trainer, Events.EPOCH_STARTED, distrib_set_epoch,
                         "the tutorial's setup_common_training_handlers: train_sampler.set_epoch(epoch - 1)")
        self._attach(trainer, Events.ITERATION_COMPLETED(every=LOG_INTERVAL), log_training_loss,
                     f"the quick start's log_training_loss, every log_interval={LOG_INTERVAL} iterations")
        # the run's cadence through Ignite's event filter, in place of the page's EPOCH_COMPLETED
        validate_every = (job.val_every or job.max_steps) * job.grad_accum
        validate_at = Events.ITERATION_COMPLETED(event_filter=lambda _, it: it % validate_every == 0 or it == max_iters)
        self._attach(trainer, validate_at, log_training_results,
                     "the quick start's train_evaluator.run(train_loader), every val_every*grad_accum iterations and "
                     "the last")
        self._attach(trainer, validate_at, log_validation_results,
                     "the quick start's val_evaluator.run(val_loader), every val_every*grad_accum iterations and the "
                     "last")
        self._attach(trainer, Events.ITERATION_COMPLETED(event_filter=lambda _, it: it % every == 0 or it == max_iters),
                     checkpoint, "Checkpoint at the run's cadence: every ckpt_every*grad_accum iterations and the last")
        self.attach_handlers(job, trainer, model)
        start = 0
        if job.resume_from:
            path = resolve_checkpoint(job.resume_from)
            Checkpoint.load_objects(to_load=to_save, checkpoint=_load_on_cpu(path))
            start = trainer.state.iteration
            self._effective["resumed_from"] = os.path.abspath(path)
        scaler = getattr(trainer.state, "scaler", None)      # create_supervised_trainer's own GradScaler
        self._record(job, trainer, val_evaluator, checkpoint, train_loader, model, scaler, start // job.grad_accum,
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
            "wrapper": "pytorch-ignite", "version": ignite.__version__,
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
            report["trainer_arguments"] = trainer_arguments(job)
            applies = {"clip.not_applied": job.grad_clip is not None, "batch.partial": job.world_size == 1,
                       "val.repeated": job.world_size > 1}
            self.record_deviations(*(d.code for d in DEVIATIONS if applies.get(d.code, True)))
        self.explicit_settings = explicit
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
