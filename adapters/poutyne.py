"""Poutyne: `Model.fit_generator` / `Model.fit` with Poutyne's callbacks on an evalkit task (`trainer=poutyne`).

Poutyne's `Model` holds the network, optimizer and loss and runs the loop (epochs, `batches_per_step` accumulation,
callbacks); everything goes through its documented arguments, methods and `Callback` events, nothing monkeypatched.
It trains in one process: world size > 1 is refused as documented-unsupported.
- `aligned`: `fit_generator` over `_Batches` (evalkit's micro-batches, ending an epoch at the next window boundary
  once `stop_training` is set, since Poutyne reads it only after an epoch); a first callback detects each optimizer
  step (Poutyne has no event for it) and steps the scheduler (`explicit_settings`).
- `defaults`: Poutyne 1.19.0's "few seconds to Poutyne" page line for line (`quick_start`, `departures`).
Known differences: none in aligned mode; defaults mode's are `DEVIATIONS`. The full record: docs/wrappers/poutyne.md.
"""
from __future__ import annotations

import functools
import math
import os
import re
from typing import Any, Callable

import torch

from evalkit.contract import (
    Departure,
    Deviation,
    QuickStartPage,
    Recipe,
    TrainJob,
    UnsupportedCombination,
    WrapperAdapter,
)
from evalkit.contract.checkpoint import (
    CorruptCheckpoint,
    MissingCheckpoint,
    atomic_save,
    capture_rng,
    latest_checkpoint,
    restore_rng,
    safe_load,
)
from evalkit.worker.optim import WarmupSchedule

POUTYNE_VERSION = "1.19.0"           # the installed poutyne whose pages defaults mode follows
DOCS = "https://poutyne.org"
MODEL_TO_DOCS = f"{DOCS}/model.html#poutyne.Model.to"
CHECKPOINT_FORMAT = 1
_EPOCH = re.compile(r"^epoch_(\d+)\.ckpt$")
QUICK_START = (
    QuickStartPage(f"https://pypi.org/project/poutyne/{POUTYNE_VERSION}/", POUTYNE_VERSION,
                   "Getting started: few seconds to Poutyne (the package's description): device, Model(network, "
                   "'sgd', 'cross_entropy', batch_metrics, epoch_metrics, device=device), model.fit(train_x, train_y, "
                   "validation_data=(valid_x, valid_y), epochs=5, batch_size=32)"),
    QuickStartPage(f"{DOCS}/model.html#poutyne.Model", POUTYNE_VERSION,
                   "Model(optimizer={'optim': name, **arguments}); fit(batches_per_step=..., initial_epoch=...); "
                   "load_weights, load_optimizer_state"),
    QuickStartPage(f"{DOCS}/callbacks.html", POUTYNE_VERSION,
                   "LR schedulers (LambdaLR: torch's, stepped at each epoch's end), ClipNorm, ModelCheckpoint, "
                   "OptimizerCheckpoint, LRSchedulerCheckpoint (after every epoch; load_state to resume)"),
)
DEPARTURES = (
    Departure("network = job.task.model instead of the page's nn.Sequential", "evalkit built, seeded and hooked this "
              "instance; every arm trains the same one", "model"),
    Departure("train_x, train_y / valid_x, valid_y are the task's tensors instead of the page's random NumPy arrays, "
              "and the loss function is the task's loss module instead of 'cross_entropy'", "the task owns its data "
              "and its loss module (hooked by evalkit); the same for every arm", "data"),
    Departure("no batch_metrics=['accuracy'] / epoch_metrics=['f1', AUROC]", "the page's classification metrics; the "
              "task's own metric is computed by evalkit's observers", "data"),
    Departure("ModelCheckpoint, OptimizerCheckpoint and LRSchedulerCheckpoint (epoch_<n>.*) in job.ckpt_dir",
              "the page saves nothing; evalkit's resume and stability checks resume from the run's checkpoints",
              "observation"),
)
# The setting that aligns each kind of semantic finding (probe codes, or their family before the dot), reported as
# `aligns` in the effective config; the semantic probe names it beside each finding.
ALIGNS = {
    "lr": "a Callback calling the torch scheduler's step() after every optimizer step (Poutyne's LR scheduler "
          "callbacks step at each epoch's end)",
    "sched": "a Callback calling the torch scheduler's step() after every optimizer step",
    "order": "fit_generator over evalkit's per-rank DataLoader instead of fit(x, y)'s DataLoader(shuffle=True)",
    "batch": "fit_generator over a DataLoader with drop_last=True (evalkit's order)",
    "steps": "a training generator that ends its epoch once model.stop_training is set, set at max_steps (Poutyne "
             "stops only at an epoch's end)",
    "val": "model.predict_generator(val_loader) from a Callback every val_every optimizer steps instead of "
           "validation_data (after every epoch)",
    "clip": "clip_grad_norm_ in a torch optimizer step pre-hook (ClipNorm clips in on_backward_end, before Poutyne "
            "divides the accumulated gradient)",
    "precision": "the network and loss function called under torch.autocast (Poutyne has no precision option)",
    "loss_norm": "batches handed as ({'inputs': x, 'batch_size': its target tokens}, {'targets': y}): "
                 "batches_per_step weighs each micro-batch's loss by the batch size get_batch_size infers (a dict's "
                 "'batch_size') and divides the window's gradient by their sum, the token mean over the window",
}
DEVIATIONS = (   # all of defaults mode: what the quick start does differently
    Deviation("steps.extra", "defaults: Poutyne bounds a run in epochs and stops only at an epoch's end: fit trains "
              "the fewest whole epochs holding max_steps, to the end of the epoch where max_steps falls"),
    Deviation("order.shuffled", "defaults: fit(x, y) shuffles with DataLoader(shuffle=True), a new order each epoch "
              "from torch's global RNG, not evalkit's order"),
    Deviation("batch.partial", "defaults: no drop_last: an epoch's incomplete last batch is kept"),
    Deviation("lr.per_epoch", "defaults: the quick start has no scheduler; evalkit hands the run's per-step schedule "
              "to LambdaLR, Poutyne's LR scheduler callback, which steps it at each epoch's end: the LR changes once "
              "per epoch", by="evalkit"),
    Deviation("sched.count", "defaults: the quick start has no scheduler; evalkit's per-step schedule in Poutyne's "
              "LambdaLR callback: its step count is the number of epochs completed, not of optimizer steps",
              by="evalkit"),
    Deviation("val.cadence", "defaults: Model.fit has no setting for a validation cadence in steps: validation "
              "(validation_data) after every epoch, not every val_every optimizer steps"),
    Deviation("loss.per_sample_mean", "defaults: batches_per_step divides the window's summed loss * batch size "
              "gradient by its samples: the epoch's incomplete last batch weighs by its size in its window"),
    Deviation("loss_norm", "defaults: a task whose samples hold different numbers of loss terms (tokens): "
              "batches_per_step weighs each micro-batch's mean loss by its samples (get_batch_size), a mean of "
              "micro-batch means (baseline: the token mean over the window)"),
    Deviation("clip.per_micro_batch", "defaults: ClipNorm clips in on_backward_end, after every micro-batch: the "
              "running sum of loss * batch size gradients, before Poutyne divides it by the window's samples"),
    Deviation("precision.mismatch", "defaults: Poutyne has no precision option (no autocast, no GradScaler): a "
              "mixed-precision run trains in fp32"),
    Deviation("resume.epoch_restarts", "defaults: checkpoints after every epoch only (Poutyne's checkpoint callbacks "
              "count epochs), without data position or RNG: a resumed run restarts the interrupted epoch with a new "
              "shuffle"),
    Deviation("stop.at_epoch_end", "defaults: model.stop_training (a callback's stop) takes effect at the epoch's "
              "end"),
)


# ------------------------------------------------------------------ what the run asks for, in Poutyne's terms
def poutyne_optimizer(recipe: Recipe) -> dict[str, Any]:
    """The run's optimizer in the form `Model(optimizer=...)` documents: `{'optim': name, **arguments}`."""
    if recipe.optimizer == "sgd":
        return {"optim": "sgd", "lr": recipe.lr, "momentum": recipe.momentum, "weight_decay": recipe.weight_decay}
    if recipe.optimizer in ("adamw", "adam"):
        return {"optim": recipe.optimizer, "lr": recipe.lr, "betas": recipe.betas,
                "weight_decay": recipe.weight_decay}
    raise ValueError(f"train.optimizer={recipe.optimizer!r} is not one of adamw, adam, sgd")


def run_schedule(job: TrainJob) -> WarmupSchedule:
    """The run's LR factor per scheduler step (`job.make_scheduler`'s), for Poutyne's `LambdaLR(lr_lambda=...)`."""
    r = job.recipe
    return WarmupSchedule(r.schedule, r.warmup_steps, job.max_steps, r.min_lr_ratio)


def quick_start_epochs(job: TrainJob) -> tuple[int, int]:
    """(epochs, optimizer steps per epoch) of `fit` in defaults mode: the fewest whole epochs holding max_steps
    (Poutyne's loader keeps the incomplete last batch, and steps an epoch's short last window)."""
    batches = math.ceil(len(job.task.train_set) / job.batch_size)
    per_epoch = math.ceil(batches / job.grad_accum)
    return math.ceil(job.max_steps / per_epoch), per_epoch


def defaults_deviations(job: TrainJob, epochs: int, per_epoch: int) -> list[str]:
    """The codes of `DEVIATIONS` that apply to a defaults job."""
    partial = len(job.task.train_set) % job.batch_size != 0
    applies = {"steps.extra": epochs * per_epoch > job.max_steps, "batch.partial": partial,
               "loss.per_sample_mean": job.grad_accum > 1 and partial,
               "loss_norm": job.grad_accum > 1 and job.task.loss_terms is not None,
               "clip.per_micro_batch": job.grad_accum > 1 and job.grad_clip is not None,
               "precision.mismatch": job.precision.autocast_dtype is not None}
    return [d.code for d in DEVIATIONS if applies.get(d.code, True)]


def check_supported(job: TrainJob, mode: str) -> None:
    """Refuse what Poutyne cannot run: several processes (both modes), fp16 loss scaling (aligned)."""
    if job.world_size > 1:
        raise UnsupportedCombination(
            f"Poutyne trains in one process: world size {job.world_size} cannot run (its only multi-device mode is "
            "Model.to([devices]), torch.nn.parallel.data_parallel in one process; no multi-process data parallelism)",
            UnsupportedCombination.DOCUMENTED, documented_at=MODEL_TO_DOCS)
    if mode == "aligned" and job.precision.grad_scaler:
        raise UnsupportedCombination(
            f"Poutyne {POUTYNE_VERSION} has no loss scaling: its training step calls loss.backward() and "
            f"optimizer.step() itself, so no GradScaler can run {job.precision.name} (fp16 needs dynamic loss scaling)")


# ------------------------------------------------------------------ the pieces aligned mode hands Poutyne
class _Autocast(torch.nn.Module):
    """The network Poutyne calls in a mixed-precision run: evalkit's model under `torch.autocast`."""

    def __init__(self, model: torch.nn.Module, job: TrainJob):
        super().__init__()
        self.model = model
        self._autocast = functools.partial(job.precision.autocast, job.device)

    def forward(self, *x):
        with self._autocast():
            return self.model(*x)


class _TokenInputs(torch.nn.Module):
    """The network Poutyne calls on a token task: evalkit's model on the inputs of a `_token_batch` (and on plain
    tensors, as validation hands them)."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x["inputs"] if isinstance(x, dict) else x)


def _token_batch(job: TrainJob, x: torch.Tensor, y: torch.Tensor) -> tuple[dict, dict]:
    """A token task's micro-batch as Poutyne's batch-size inference reads it: no tensor at the top of either side,
    so `get_batch_size` takes the inputs' `'batch_size'`, the batch's target tokens. `batches_per_step` then weighs
    each micro-batch's loss by its tokens and divides the window's gradient by the window's tokens."""
    return {"inputs": x, "batch_size": job.task.loss_terms(y)}, {"targets": y}


def _on_targets(loss: Callable) -> Callable:
    """The loss function Poutyne calls on a token task: the task's loss on the targets of a `_token_batch`."""
    def loss_on_targets(y_pred, y):
        return loss(y_pred, y["targets"] if isinstance(y, dict) else y)
    return loss_on_targets


def _under_autocast(loss: Callable, job: TrainJob) -> Callable:
    """The loss function Poutyne calls, under autocast when the run is mixed precision (as the baseline's)."""
    if job.precision.autocast_dtype is None:
        return loss

    def loss_under_autocast(y_pred, y):
        with job.precision.autocast(job.device):
            return loss(y_pred, y)
    return loss_under_autocast


class _Batches:
    """The training generator: each `iter()` walks one epoch of this rank's micro-batches in evalkit's order (from
    `start_batch` the first time) and ends early, where a window would start, once `model.stop_training` is set.
    On a token task each micro-batch is a `_token_batch`.
    No `__len__`: with one, fit_generator cycles the iterator to that many batches. `epoch` and `position` say where
    the batches handed out so far end."""

    def __init__(self, job: TrainJob, model, epoch: int, start_batch: int):
        self.job, self.model = job, model
        self.epoch, self.position = epoch, start_batch
        self.batches_per_epoch = job.train_sampler().batches_per_epoch
        self.windows_per_epoch = math.ceil(self.batches_per_epoch / job.grad_accum)
        self._walked = False

    def __iter__(self):
        if self._walked:
            self.epoch, self.position = self.epoch + 1, 0
        self._walked = True
        return self._walk(iter(self.job.train_loader(self.epoch, start_batch=self.position)))

    def _walk(self, batches):
        while self.position < self.batches_per_epoch:
            if self.position % self.job.grad_accum == 0 and self.model.stop_training:
                return
            self.position += 1
            x, y = next(batches)
            yield (x, y) if self.job.task.loss_terms is None else _token_batch(self.job, x, y)

    def at_window_end(self) -> bool:
        return self.position % self.job.grad_accum == 0

    def resume_point(self) -> tuple[int, int]:
        """(epoch, batch_in_epoch) the next batch comes from."""
        if self.position >= self.batches_per_epoch:
            return self.epoch + 1, 0
        return self.epoch, self.position


@functools.cache
def _callback_classes():
    """The adapter's two Poutyne callbacks (classes of an installed poutyne), built once."""
    from poutyne import Callback

    class StepClock(Callback):
        """First callback: notices each optimizer step, steps evalkit's scheduler, sets stop_training at max_steps."""

        def __init__(self, job: TrainJob, data: _Batches, scheduler, step: int):
            super().__init__()
            self.job, self.data, self.scheduler, self.step = job, data, scheduler, step
            self.unhandled = False          # a step the cadence has not seen yet

        def on_train_batch_end(self, batch_number, logs):
            if self.data.at_window_end():
                self._stepped()

        def on_epoch_end(self, epoch_number, logs):
            if not self.data.at_window_end():    # Poutyne stepped the epoch's short last window after its batch
                self._stepped()

        def _stepped(self) -> None:
            self.scheduler.step()
            self.step += 1
            self.unhandled = True
            if self.step >= self.job.max_steps:
                self.model.stop_training = True

    class Cadence(Callback):
        """Last callback: validation and checkpoint after each step the clock noticed (after the user's callbacks)."""

        def __init__(self, after_step: Callable[[int], None], clock: StepClock):
            super().__init__()
            self.after_step, self.clock = after_step, clock

        def on_train_batch_end(self, batch_number, logs):
            self._handle()

        def on_epoch_end(self, epoch_number, logs):
            self._handle()

        def _handle(self) -> None:
            if self.clock.unhandled:
                self.clock.unhandled = False
                self.after_step(self.clock.step)

    return StepClock, Cadence


def _write_atomically(path: str, save: Callable) -> None:
    """`save(fd)` into a temporary file, renamed to `path` once complete (a kill mid-write leaves only the former)."""
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "wb") as fd:
        save(fd)
    os.replace(tmp, path)


class PoutyneAdapter(WrapperAdapter):
    """`trainer=poutyne`: Poutyne's `Model` on evalkit's task (see the module docstring)."""
    option_names = ()   # trainer.options: none (a key is refused, with the nearest: evalkit.contract.options)

    deviations = DEVIATIONS
    aligns = ALIGNS
    quick_start = QUICK_START
    departures = DEPARTURES

    def __init__(self, mode: str = "aligned", options: dict[str, Any] | None = None):
        super().__init__(mode, options)
        self._val_history: list[dict[str, Any]] = []

    def fit(self, job: TrainJob) -> None:
        check_supported(job, self.mode)
        if self.mode == "aligned":
            self._fit_aligned(job)
        else:
            self._fit_defaults(job)

    # ------------------------------------------------------------------ where a user's own code goes
    def loss_function(self, job: TrainJob) -> Callable:
        """The training loss `loss_function(y_pred, y)` Poutyne's Model is built with."""
        return job.task.loss_fn

    def callbacks(self, job: TrainJob) -> list:
        """Poutyne `Callback`s of the user's own, after the adapter's (in aligned mode before its validation and
        checkpoint callback). Poutyne calls `on_train_batch_end` once per micro-batch."""
        return []

    # ------------------------------------------------------------------ aligned
    def _fit_aligned(self, job: TrainJob) -> None:
        from poutyne import Model

        model = job.task.model.to(job.device)
        tokens = job.task.loss_terms is not None
        network = _TokenInputs(model) if tokens else model
        network = _Autocast(network, job) if job.precision.autocast_dtype is not None else network
        loss_function = _on_targets(self.loss_function(job)) if tokens else self.loss_function(job)
        optimizer = job.make_optimizer(model.parameters())
        scheduler = job.make_scheduler(optimizer)
        if job.grad_clip is not None:
            params, max_norm = list(model.parameters()), job.grad_clip

            def clip(opt, args, kwargs) -> None:     # after Poutyne divided the window's gradient, before the step
                torch.nn.utils.clip_grad_norm_(params, max_norm)
            optimizer.register_step_pre_hook(clip)
        # train.compile: Poutyne has no option for it; its Model is given the network compiled
        pmodel = Model(torch.compile(network) if job.compile else network, optimizer,
                       _under_autocast(loss_function, job), device=job.device)
        step, epoch, batch = self._load(job, pmodel, scheduler) if job.resume_from else (0, 0, 0)

        data = _Batches(job, pmodel, epoch, batch)
        StepClock, Cadence = _callback_classes()
        clock = StepClock(job, data, scheduler, step)

        def after_step(done: int) -> None:
            if job.should_validate(done) or pmodel.stop_training:
                self._validate(job, pmodel, done)
            if job.should_checkpoint(done):
                self._save(job, pmodel, scheduler, done, *data.resume_point())

        callbacks = [clock, *self.callbacks(job), Cadence(after_step, clock)]
        epochs = epoch + 1 + math.ceil((job.max_steps - step) / data.windows_per_epoch)
        arguments = {"epochs": epochs, "initial_epoch": epoch + 1, "batches_per_step": job.grad_accum,
                     "verbose": False}
        self._record(job, pmodel, step, callbacks, explicit={
            "model": f"Model({type(network).__name__}, {type(optimizer).__name__} (job.make_optimizer), "
                     f"loss_function, device={job.device})",
            "fit_generator": {**arguments, "train_generator": "evalkit's per-rank micro-batches of one epoch per "
                              "iter(), ending once model.stop_training is set", "valid_generator": None},
            "loss_division": ("Poutyne's: the window's summed loss * batch size gradient over its batch sizes, "
                              "each micro-batch's batch size its target tokens (({'inputs': x, 'batch_size': "
                              "tokens}, {'targets': y}), read by get_batch_size)" if tokens else
                              "Poutyne's: the window's summed loss * batch size gradient over its samples (every "
                              "micro-batch has batch_size samples)"),
            "scheduler": "evalkit's torch scheduler, step() by the first callback after every optimizer step",
            "clipping": "clip_grad_norm_ (global L2) in an optimizer step pre-hook"
                        if job.grad_clip is not None else None,
            "precision": "torch.autocast around the network and the loss function"
                         if job.precision.autocast_dtype is not None else "fp32",
            "stop": "model.stop_training set at max_steps; the generator ends the epoch where a window would start",
            "validation": "model.predict_generator(job.val_loader(), has_ground_truth=True) at "
                          "job.should_validate(step) and at a stop",
            "checkpoint": "step_<n>.ckpt (save_weights), step_<n>.optim (save_optimizer_state), step_<n>.pt "
                          "(scheduler, RNG, data position) at job.should_checkpoint(step)",
            "seeding": "none (evalkit seeded the process)",
        })
        if step < job.max_steps:
            pmodel.fit_generator(data, None, callbacks=callbacks, **arguments)
        self._effective["final_step"] = clock.step

    def _validate(self, job: TrainJob, pmodel, step: int) -> None:
        """Poutyne's inference over the validation split (eval mode, no grad); evalkit's observers measure it."""
        outputs = pmodel.predict_generator(job.val_loader(), has_ground_truth=True, concatenate_returns=False,
                                           convert_to_numpy=False, verbose=False)
        self._val_history.append({"step": step, "batches": len(outputs)})

    def _save(self, job: TrainJob, pmodel, scheduler, step: int, epoch: int, batch_in_epoch: int) -> None:
        base = job.checkpoint_path(step, "")
        os.makedirs(job.ckpt_dir, exist_ok=True)
        _write_atomically(f"{base}.ckpt", pmodel.save_weights)
        _write_atomically(f"{base}.optim", pmodel.save_optimizer_state)
        atomic_save({"format": CHECKPOINT_FORMAT, "step": step, "epoch": epoch, "batch_in_epoch": batch_in_epoch,
                     "scheduler": scheduler.state_dict(), "rng": capture_rng()}, f"{base}.pt")

    def _load(self, job: TrainJob, pmodel, scheduler) -> tuple[int, int, int]:
        path = latest_checkpoint(job.resume_from, "step_*.pt")
        state = safe_load(path)
        if state.get("format") != CHECKPOINT_FORMAT:
            raise CorruptCheckpoint(f"{path} is not a checkpoint of the poutyne adapter (format "
                                    f"{state.get('format')!r}); resume from a checkpoint it wrote")
        base = path.removesuffix(".pt")
        for suffix in (".ckpt", ".optim"):
            if not os.path.isfile(f"{base}{suffix}"):
                raise MissingCheckpoint(f"checkpoint {base}{suffix} is missing beside {path}; check resume_from")
        pmodel.load_weights(f"{base}.ckpt")
        pmodel.load_optimizer_state(f"{base}.optim")
        scheduler.load_state_dict(state["scheduler"])
        restore_rng(state["rng"])
        self._effective["resumed_from"] = os.path.abspath(path)
        return state["step"], state["epoch"], state["batch_in_epoch"]

    # ------------------------------------------------------------------ defaults
    def _fit_defaults(self, job: TrainJob) -> None:
        from poutyne import ClipNorm, LambdaLR, LRSchedulerCheckpoint, Model, ModelCheckpoint, OptimizerCheckpoint

        device = job.device
        network = job.task.model
        train_x, train_y = job.task.train_set.tensors
        valid_x, valid_y = job.task.val_set.tensors
        model = Model(torch.compile(network) if job.compile else network, poutyne_optimizer(job.recipe),
                      self.loss_function(job), device=device)
        lr_scheduler = LambdaLR(lr_lambda=run_schedule(job))
        saved = os.path.join(job.ckpt_dir, "epoch_{epoch:04d}")
        os.makedirs(job.ckpt_dir, exist_ok=True)
        callbacks = [*([ClipNorm(network.parameters(), job.grad_clip)] if job.grad_clip is not None else []),
                     LRSchedulerCheckpoint(lr_scheduler, f"{saved}.lrsched"), ModelCheckpoint(f"{saved}.ckpt"),
                     OptimizerCheckpoint(f"{saved}.optim"), *self.callbacks(job)]
        epochs, per_epoch = quick_start_epochs(job)
        arguments: dict[str, Any] = {"epochs": epochs, "batch_size": job.batch_size}
        if job.grad_accum > 1:
            arguments["batches_per_step"] = job.grad_accum
        if job.num_workers:
            arguments["dataloader_kwargs"] = {"num_workers": job.num_workers}
        initial_epoch = self._load_epoch(job, model, lr_scheduler) + 1 if job.resume_from else 1
        self._record(job, model, (initial_epoch - 1) * per_epoch, callbacks, explicit=None)
        self._effective.update(fit_arguments={**arguments, "initial_epoch": initial_epoch},
                               optimizer_argument=poutyne_optimizer(job.recipe))
        self.record_deviations(*defaults_deviations(job, epochs, per_epoch))
        history = model.fit(train_x, train_y, validation_data=(valid_x, valid_y), initial_epoch=initial_epoch,
                            callbacks=callbacks, **arguments)
        self._val_history.extend({"epoch": log["epoch"], "val_loss": log.get("val_loss")} for log in history)

    def _load_epoch(self, job: TrainJob, model, lr_scheduler) -> int:
        """Load the latest epoch's checkpoint callbacks' files from `resume_from`; returns that epoch."""
        listed = os.listdir(job.resume_from) if os.path.isdir(job.resume_from) else []
        found = [int(m.group(1)) for m in map(_EPOCH.match, listed) if m]
        if not found:
            raise MissingCheckpoint(f"no Poutyne checkpoint (epoch_*.ckpt) in {job.resume_from}; check resume_from")
        epoch = max(found)
        base = os.path.join(job.resume_from, f"epoch_{epoch:04d}")
        model.load_weights(f"{base}.ckpt")
        model.load_optimizer_state(f"{base}.optim")
        lr_scheduler.load_state(f"{base}.lrsched")
        self._effective["resumed_from"] = os.path.abspath(f"{base}.ckpt")
        return epoch

    # ------------------------------------------------------------------ what Poutyne reports
    def _record(self, job: TrainJob, pmodel, start_step: int, callbacks: list, explicit: dict | None) -> None:
        import poutyne

        report: dict[str, Any] = {
            "wrapper": "poutyne.Model", "version": poutyne.__version__,
            "model": {"network": type(pmodel.network).__name__, "optimizer": type(pmodel.optimizer).__name__,
                      "optimizer_defaults": pmodel.optimizer.defaults,
                      "loss_function": type(pmodel.loss_function).__name__, "device": str(pmodel.device),
                      "other_device": pmodel.other_device, "metrics": pmodel.metrics_names},
            "callbacks": [type(cb).__name__ for cb in callbacks],
            "precision": job.precision.name, "grad_accum": job.grad_accum, "grad_clip": job.grad_clip,
            "max_steps": job.max_steps, "val_every": job.val_every, "ckpt_every": job.ckpt_every,
            "start_step": start_step, "world_size": job.world_size,
            "checkpoint_loading": "Model.load_weights / load_optimizer_state: torch.load(pickle_module=pickle, "
                                  "map_location='cpu')",
            "monkeypatching": "none",
            "validation": self._val_history,
        }
        self.explicit_settings = explicit
        self._effective.update(report)
