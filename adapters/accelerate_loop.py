"""🤗 Accelerate (`accelerate.Accelerator`) driving a hand-written loop on an evalkit task (`trainer=accelerate`).

The loop is the one Accelerate's documentation teaches (`prepare`, `accumulate`, `backward`, `clip_grad_norm_` on
`sync_gradients`, `save_state` / `load_state`), its ranks started by `accelerate launch`. Nothing is monkeypatched.
- `aligned`: every Accelerate knob touching the baseline's semantics set explicitly (`explicit_settings`), the data
  in evalkit's per-rank order (checked at set-up).
- `defaults`: Accelerate 1.16's quicktour and gradient accumulation guide line for line (`quick_start`, `departures`).
A checkpoint directory without `evalkit_position.json` (written last) is incomplete; no object is registered with
`register_for_checkpointing`, which would be loaded with `weights_only=False`.
What no documented option aligns: `DEVIATIONS` (`STATE_DEVIATIONS`: Accelerate's process state, shared with the
transformers Trainer). The full record: docs/wrappers/accelerate_loop.md.
"""
from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, is_dataclass
from typing import Any

import torch
from torch.utils.data import DataLoader

from evalkit.contract import (
    Departure,
    Deviation,
    QuickStartPage,
    TrainJob,
    UnsupportedCombination,
    WrapperAdapter,
    same_device,
)
from evalkit.contract.checkpoint import CorruptCheckpoint
from evalkit.tasks.order import GlobalOrderSampler

MIXED_PRECISION = {"fp32": "no", "bf16_mixed": "bf16", "fp16_mixed": "fp16"}
ACCELERATE_DOCS = "https://huggingface.co/docs/accelerate/v1.16.0/en"
QUICK_START = (
    QuickStartPage(f"{ACCELERATE_DOCS}/quicktour", "1.16.0",
                   "Adapt training code (Accelerator(), accelerator.device, prepare, accelerator.backward) and "
                   "Distributed evaluation (prepare(validation_dataloader), gather_for_metrics)"),
    QuickStartPage(f"{ACCELERATE_DOCS}/usage_guides/gradient_accumulation", "1.16.0",
                   "The finished code: Accelerator(gradient_accumulation_steps=...), with "
                   "accelerator.accumulate(model), optimizer.step(), scheduler.step(), optimizer.zero_grad()"),
    QuickStartPage(f"{ACCELERATE_DOCS}/package_reference/accelerator#accelerate.Accelerator.clip_grad_norm_",
                   "1.16.0", "clip_grad_norm_ example: under `if accelerator.sync_gradients:` (only when the run "
                   "asks for clipping)"),
    QuickStartPage(f"{ACCELERATE_DOCS}/usage_guides/checkpoint", "1.16.0",
                   "save_state / load_state, and skip_first_batches to resume inside an epoch"),
)
DEPARTURES = (
    Departure("model = job.task.model instead of the page's own model", "evalkit built, seeded and hooked this "
              "instance; every arm trains the same one", "model"),
    Departure("the task's train/validation datasets and loss module (loss_function = job.task.loss_fn) in the "
              "pages' DataLoader(dataset, batch_size=..., shuffle=True) / loss_function", "the task's data carry the "
              "sample ids evalkit observes and its loss module is hooked; the same for every arm", "data"),
    Departure("metric.add_batch(all_predictions, all_targets) after gather_for_metrics is left out", "the task's "
              "metric is computed by evalkit's observers from the model's outputs", "observation"),
    Departure("the validation forward `predictions = model(inputs)` runs under torch.no_grad() (the page writes "
              "no no_grad; the model's train/eval mode is left as the page leaves it)", "evalkit's observers tell "
              "validation forwards from training micro-batches by autograd being off: grad-enabled forwards would be "
              "counted into the next accumulation window. A forward without backward changes no parameter, so "
              "training is the page's; only the cost of recording the unused graph is not paid", "observation"),
    Departure("evalkit_position.json written beside each save_state directory", "evalkit's resume check reads "
              "the step and data position from it; Accelerate's state does not hold them", "observation"),
)
POSITION_FILE = "evalkit_position.json"
POSITION_FORMAT = "evalkit-accelerate/1"
# What the aligned loop does (explicit_settings, after the Accelerator's arguments).
ALIGNED_LOOP = {
    "seeding": "no set_seed: evalkit seeded the process before building the task (as for the baseline)",
    "data_order": "prepared DataLoader over evalkit's global order; Accelerate's batch sharding yields "
                  "evalkit's per-rank order (checked at set-up)",
    "scheduler_step": "loop calls scheduler.step() once per optimizer step (sync_gradients)",
    "clipping": "accelerator.clip_grad_norm_ (unscales first) when sync_gradients",
    "loss_autocast": "loss computed under accelerator.autocast(), as the baseline computes it under autocast",
    "token_task": "a task whose samples hold different numbers of loss terms: the gradient accumulation guide's "
                  "'training samples of variable size' skeleton instead of accelerator.accumulate (window fetched "
                  "first, loss x tokens x gradient_accumulation_steps x num_processes / the window's tokens on all "
                  "ranks, no_sync on all but its last backward, clipping, optimizer and scheduler once per window)",
    "validation": "unwrapped model, eval mode, no_grad, accelerator.autocast(), on job.val_loader()",
    "checkpoint": "save_state(safe_serialization=True) + evalkit_position.json; resume: load_state + "
                  "skip_first_batches",
}


# The setting that aligns each kind of semantic finding (probe codes, or their family before the dot), reported as
# `aligns` in the effective config; the semantic probe names it beside each finding.
ALIGNS = {
    "order": "a DataLoader over evalkit's global order, prepared with DataLoaderConfiguration(split_batches=False, "
             "even_batches=True, use_seedable_sampler=False)",
    "lr": "Accelerator(step_scheduler_with_optimizer=False) and scheduler.step() once per optimizer step "
          "(when accelerator.sync_gradients); with several processes the prepared scheduler otherwise steps "
          "num_processes times per call, unless DataLoaderConfiguration(split_batches=True) "
          "(AcceleratedScheduler.step)",
    "sched": "Accelerator(step_scheduler_with_optimizer=False) and scheduler.step() once per optimizer step "
             "(when accelerator.sync_gradients)",
    "window.short_underscaled": "none: accelerator.backward divides each loss by gradient_accumulation_steps",
    "loss_norm": "the gradient accumulation guide's 'training samples of variable size' skeleton: fetch the window "
                 "first, gather its target tokens, loss x tokens x gradient_accumulation_steps x num_processes / the "
                 "window's tokens, no_sync on all but the last backward, one optimizer step per window",
    "clip": "accelerator.clip_grad_norm_(params, max_norm) when accelerator.sync_gradients",
    "ddp": "Accelerator(cpu=True) on CPU (or ACCELERATE_USE_CPU=true, which `accelerate launch --cpu` sets): "
           "Accelerate then joins the launched ranks, shards the data and averages the gradients",
    "batch": "DataLoader(..., drop_last=True) (aligned: evalkit's global order with drop_last=True)",
    "micro": "model.train() before the training loop",
    "val.train_mode": "model.eval() before the validation loop and model.train() after it",
    "val.repeated": "Accelerator(dataloader_config=DataLoaderConfiguration(even_batches=False)) (for the training "
                    "loader too), or a validation loader over each rank's own shard, not prepared",
}

def aligned_settings(job: TrainJob) -> dict[str, Any]:
    """The Accelerator's arguments in aligned mode, every configuration object as its keyword arguments (reported,
    as they are, under explicit_settings; `accelerator_arguments` builds them)."""
    cpu = job.device.type == "cpu"
    return {
        "mixed_precision": MIXED_PRECISION[job.precision.name], "cpu": cpu, "device_placement": True,
        "step_scheduler_with_optimizer": False, "rng_types": [],
        "dataloader_config": {"split_batches": False, "dispatch_batches": False, "even_batches": True,
                              "use_seedable_sampler": False, "non_blocking": False,
                              "use_stateful_dataloader": False},
        "gradient_accumulation_plugin": {"num_steps": job.grad_accum, "adjust_scheduler": False,
                                         "sync_with_dataloader": True, "sync_each_batch": False},
        "ddp_kwargs": {"dim": 0, "broadcast_buffers": True, "bucket_cap_mb": 25,
                       "find_unused_parameters": False, "check_reduction": False,
                       "gradient_as_bucket_view": False, "static_graph": False},
        # one process: no process group, as the baseline (Accelerate 1.16 with a backend and no launcher variables
        # asks torch.distributed for a world size no group has: ValueError)
        **({"init_process_group_kwargs": {"backend": "gloo" if cpu else "nccl"}} if job.world_size > 1 else {}),
        "grad_scaler_kwargs": {"init_scale": 65536.0, "growth_factor": 2.0, "backoff_factor": 0.5,
                               "growth_interval": 2000, "enabled": True},
        "project_config": {"project_dir": job.ckpt_dir, "automatic_checkpoint_naming": False, "total_limit": None},
    }


def compiled(job: TrainJob, arguments: dict[str, Any]) -> dict[str, Any]:
    """`train.compile`: `Accelerator(dynamo_backend="inductor")` (Accelerate's "Compilation" guide; prepare() then
    compiles the model)."""
    return {**arguments, "dynamo_backend": "inductor"} if job.compile else arguments


def accelerator_arguments(settings: dict[str, Any]) -> dict[str, Any]:
    """`Accelerator(**...)` for `settings`: its configuration objects and kwargs handlers built from their dicts."""
    from accelerate.utils import (
        DataLoaderConfiguration,
        DistributedDataParallelKwargs,
        GradientAccumulationPlugin,
        GradScalerKwargs,
        InitProcessGroupKwargs,
        ProjectConfiguration,
    )

    configurations = {"dataloader_config": DataLoaderConfiguration, "project_config": ProjectConfiguration,
                      "gradient_accumulation_plugin": GradientAccumulationPlugin}
    handlers = {"ddp_kwargs": DistributedDataParallelKwargs, "init_process_group_kwargs": InitProcessGroupKwargs,
                "grad_scaler_kwargs": GradScalerKwargs}
    arguments = {key: configurations[key](**value) if key in configurations else value
                 for key, value in settings.items() if key not in handlers}
    arguments["kwargs_handlers"] = [cls(**settings[key]) for key, cls in handlers.items() if key in settings]
    return arguments


STATE_DEVIATIONS = (
    Deviation("process.one_process_ddp", "one process under torchrun on CPU (trainer.launch.one=torchrun, not "
              "`accelerate launch`): Accelerate reports MULTI_CPU for one process, so the model is wrapped in a "
              "one-process DDP"),
    Deviation("process.one_process_nccl", "one process under torchrun on CUDA: Accelerate reports MULTI_GPU for one "
              "process and starts a one-process NCCL group (barriers and gathers through NCCL; no DDP wrap); "
              "NCCL's buffers show in NVML's reading, not in the allocator's peak"),
    Deviation("threads.changed", "MULTI_CPU without OMP_NUM_THREADS: Accelerate sets torch's thread count to "
              "physical cores / local processes (see torch_num_threads)"),
)
DEVIATIONS = (
    Deviation("window.short_underscaled", "accelerator.backward divides each micro-batch loss by "
              "gradient_accumulation_steps, also in a shorter last window of an epoch (baseline: by the window's "
              "actual size); only when an epoch's per-rank batches are not a multiple of grad_accum"),
    Deviation("precision.fp32_outputs", "mixed precision: the model's forward returns fp32 outputs "
              "(convert_outputs_to_fp32; evalkit reads the compute dtype from the first Linear/Conv layer, so the "
              "observed precision is unaffected)"),
    *STATE_DEVIATIONS,
    # defaults mode: what the quick start does differently, as the job ran it
    Deviation("ddp", "defaults, under torchrun without `--cpu` (trainer.launch.many=torchrun, not the documented "
              "`accelerate launch`): Accelerator() did not join the ranks (see distributed_type, "
              "num_processes): each rank trains on all the data and no gradient is averaged across ranks (on CPU "
              "Accelerate joins torch elastic ranks only with cpu=True or ACCELERATE_USE_CPU=true, which "
              "`accelerate launch --cpu` sets)"),
    Deviation("loss_norm", "defaults: a task whose samples hold different numbers of loss terms (tokens): "
              "accelerator.backward divides each micro-batch's mean loss by gradient_accumulation_steps and DDP "
              "averages the ranks, a mean of micro-batch means (baseline: the token mean over the window on all "
              "ranks)"),
    Deviation("order.shuffled", "defaults: shuffle=True DataLoader prepared by Accelerate (a RandomSampler drawing "
              "from torch's global RNG when one process, its generator synchronised across processes otherwise; no "
              "set_seed), not evalkit's order"),
    Deviation("batch.partial", "defaults: no drop_last: the epoch's last micro-batch may be smaller"),
    Deviation("micro.train_mode", "defaults: the pages call neither model.train() nor model.eval(): the model "
              "trains in the mode it was handed in"),
    Deviation("lr", "defaults: the prepared scheduler is stepped after every optimizer.step() call: it moves only "
              "on real optimizer steps, num_processes times each, and not at all when GradScaler skips a step"),
    Deviation("val.train_mode", "defaults: validation is the quicktour's loop: the prepared model called on the "
              "prepared validation loader in the mode training left it in (no model.eval(): dropout active, "
              "batch-norm statistics updated by the validation data), outputs gathered with gather_for_metrics; at "
              "world size > 1 the prepared loader repeats samples to even out the last batch (gather_for_metrics "
              "drops them from the gathered outputs, not from the model's forwards)"),
    Deviation("val.repeated", "defaults: at world size > 1 the prepared validation loader repeats samples to even "
              "out the ranks (even_batches=True): the model runs them twice; gather_for_metrics drops them from the "
              "gathered outputs, so the metric counts each sample once (evalkit's too: trainer.val_dedup)"),
    Deviation("resume.reshuffled", "defaults: a resumed run draws the rest of the interrupted epoch from another "
              "permutation: load_state restores the RNG as it was after the epoch's shuffle was drawn, and the "
              "RandomSampler under skip_first_batches draws a new one from it (samples seen twice or not at all in "
              "that epoch)"),
)
DEFAULTS_DEVIATIONS = ("order.shuffled", "batch.partial", "micro.train_mode", "lr", "val.train_mode",
                       "resume.reshuffled")


def state_deviations(accelerator) -> list[str]:
    """The codes of `STATE_DEVIATIONS` that Accelerate's process state shows under the job's launcher."""
    kind = accelerator.distributed_type.value
    one = accelerator.num_processes == 1
    return [code for code, applies in (
        ("process.one_process_ddp", kind == "MULTI_CPU" and one),
        ("process.one_process_nccl", kind == "MULTI_GPU" and one),
        ("threads.changed", kind == "MULTI_CPU" and not os.environ.get("OMP_NUM_THREADS"))) if applies]


def normalization_deviations(job: TrainJob, mode: str) -> list[str]:
    """How the loss is divided, where it is not the baseline's: by gradient_accumulation_steps in every window
    (`window.short_underscaled`) except in the aligned skeleton for a token task, which divides by the window's tokens;
    on a token task in defaults mode a mean of micro-batch means (`loss_norm`) wherever a window holds several
    micro-batches or ranks."""
    tokens = job.task.loss_terms is not None
    if tokens and mode == "aligned":
        return []
    averaged = tokens and (job.grad_accum > 1 or job.world_size > 1)
    return ["window.short_underscaled", *(["loss_norm"] if averaged else [])]


def _as_dict(obj: Any) -> Any:
    if obj is None:
        return None
    if is_dataclass(obj):
        return {k: v for k, v in asdict(obj).items()}
    return str(obj)


def resolve_state_dir(path: str) -> str:
    """`path` itself when it is one `save_state` directory; else its latest complete `step_*` directory."""
    if os.path.isfile(os.path.join(path, POSITION_FILE)):
        return path
    if os.path.isdir(path):
        complete = [os.path.join(path, d) for d in os.listdir(path)
                    if d.startswith("step_") and os.path.isfile(os.path.join(path, d, POSITION_FILE))]
        if complete:
            return max(complete, key=lambda d: int(os.path.basename(d)[len("step_"):]))
    raise CorruptCheckpoint(f"{path} is not an Accelerate checkpoint written by evalkit (no {POSITION_FILE}, "
                            "no complete step_* directory); check resume_from")


def defaults_arguments(job: TrainJob) -> dict[str, Any]:
    """`Accelerator(**...)` in defaults mode: the quicktour's `Accelerator()` plus only what the run asks for through
    Accelerator's own arguments (accumulation above 1, a mixed precision)."""
    arguments: dict[str, Any] = {}
    if job.grad_accum != 1:
        arguments["gradient_accumulation_steps"] = job.grad_accum
    if job.precision.autocast_dtype is not None:
        arguments["mixed_precision"] = MIXED_PRECISION[job.precision.name]
    return arguments


class AccelerateAdapter(WrapperAdapter):
    option_names = ()   # trainer.options: none (a key is refused, with the nearest: evalkit.contract.options)
    deviations = DEVIATIONS
    aligns = ALIGNS
    quick_start = QUICK_START
    departures = DEPARTURES

    def fit(self, job: TrainJob) -> None:
        if self.mode == "aligned":
            self._fit_aligned(job)
        else:
            self._fit_defaults(job)

    # ------------------------------------------------------------------ aligned
    def _fit_aligned(self, job: TrainJob) -> None:
        from accelerate import Accelerator

        settings = compiled(job, aligned_settings(job))
        accelerator = Accelerator(**accelerator_arguments(settings))
        self._check_device(job, accelerator)
        if job.precision.autocast_dtype is not None and not accelerator.native_amp:
            raise UnsupportedCombination(
                f"accelerate does not autocast mixed_precision={accelerator.mixed_precision!r} on "
                f"{accelerator.device.type} (it would silently run fp32); refused in aligned mode",
                UnsupportedCombination.SUBSTITUTION)
        if job.world_size != accelerator.num_processes:
            raise UnsupportedCombination(
                f"accelerate sees {accelerator.num_processes} processes, evalkit launched {job.world_size}",
                UnsupportedCombination.SUBSTITUTION)

        model = job.task.model.to(accelerator.device)
        optimizer = job.make_optimizer(model.parameters())
        scheduler = job.make_scheduler(optimizer)
        loss_fn = job.task.loss_fn
        sampler = GlobalOrderSampler(job.train_sampler())
        train_dl = DataLoader(job.task.train_set, batch_size=job.batch_size, sampler=sampler, drop_last=True,
                              num_workers=job.num_workers, pin_memory=job.pin_memory,
                              generator=job.loader_generator())
        net, opt, sched, train_dl = accelerator.prepare(model, optimizer, scheduler, train_dl)

        step, epoch, batch_in_epoch = self._load(job, accelerator) if job.resume_from else (0, 0, 0)
        self._check_order(job, train_dl, sampler, epoch)
        self._record(job, accelerator, net, train_dl, step, explicit={**settings, **ALIGNED_LOOP})

        batches_per_epoch = len(train_dl)
        train = self._token_windows if job.task.loss_terms is not None else self._accumulated
        model.train()
        stop = False
        while step < job.max_steps and not stop:
            train_dl.set_epoch(epoch)
            sampler.set_epoch(epoch)   # a skipping DataLoader may not forward set_epoch to the sampler
            batches = accelerator.skip_first_batches(train_dl, batch_in_epoch) if batch_in_epoch else train_dl
            steps = train(job, accelerator, (net, opt, sched, loss_fn), batches, batch_in_epoch, batches_per_epoch)
            for batch_in_epoch in steps:     # the epoch's micro-batches so far, after each optimizer step
                step += 1
                stop = self.after_optimizer_step(job, accelerator, step, model)
                self._after_step(job, accelerator, step, epoch, batch_in_epoch, batches_per_epoch,
                                 lambda: self._validate_aligned(job, accelerator, model), stop)
                if step >= job.max_steps or stop:
                    break
            else:
                epoch, batch_in_epoch = epoch + 1, 0
        self._finish(accelerator, step)

    def _accumulated(self, job: TrainJob, accelerator, prepared: tuple, batches, batch_in_epoch: int,
                     batches_per_epoch: int):
        """The rest of one epoch in `accelerator.accumulate` windows (the accumulation guide's finished code);
        yields the epoch's micro-batch count after each optimizer step."""
        net, opt, sched, loss_fn = prepared
        for x, y in batches:
            with accelerator.accumulate(net):
                with accelerator.autocast():
                    loss = self.training_loss(net, loss_fn, x, y)
                accelerator.backward(loss)
                if accelerator.sync_gradients and job.grad_clip is not None:
                    accelerator.clip_grad_norm_(net.parameters(), job.grad_clip)
                opt.step()
                opt.zero_grad(set_to_none=True)
                if accelerator.sync_gradients:
                    sched.step()
            batch_in_epoch += 1
            if accelerator.sync_gradients:
                yield batch_in_epoch

    def _token_windows(self, job: TrainJob, accelerator, prepared: tuple, batches, batch_in_epoch: int,
                       batches_per_epoch: int):
        """The rest of one epoch of a token task as the accumulation guide's "Gradient accumulation on training
        samples of variable size" skeleton writes it: the window's micro-batches fetched first (the epoch's last window
        shorter), their target tokens summed over the ranks, each loss x its tokens x gradient_accumulation_steps x
        num_processes / the window's tokens (accelerator.backward divides by gradient_accumulation_steps, DDP averages
        the ranks), DDP's no_sync on all but the window's last backward, one optimizer step per window; yields the
        epoch's micro-batch count after each optimizer step. Outside `accelerator.accumulate` the prepared optimizer
        steps on every call (sync_gradients stays True)."""
        net, opt, sched, loss_fn = prepared
        batches = iter(batches)
        while batch_in_epoch < batches_per_epoch:
            window = [next(batches) for _ in range(min(job.grad_accum, batches_per_epoch - batch_in_epoch))]
            weights = job.token_weights([y for _, y in window])   # tokens x world size / the window's on all ranks
            for i, (x, y) in enumerate(window):
                last = i == len(window) - 1 or accelerator.num_processes == 1
                with contextlib.nullcontext() if last else accelerator.no_sync(net):
                    with accelerator.autocast():
                        loss = self.training_loss(net, loss_fn, x, y)
                    accelerator.backward(loss * weights[i] * accelerator.gradient_accumulation_steps)
            if job.grad_clip is not None:
                accelerator.clip_grad_norm_(net.parameters(), job.grad_clip)
            opt.step()
            opt.zero_grad(set_to_none=True)
            sched.step()
            batch_in_epoch += len(window)
            yield batch_in_epoch
        next(batches, None)   # the prepared loader's end of epoch, where it updates Accelerate's gradient state

    # ------------------------------------------------------------------ defaults
    def _fit_defaults(self, job: TrainJob) -> None:
        from accelerate import Accelerator

        accelerator = Accelerator(**compiled(job, defaults_arguments(job)))
        self._check_device(job, accelerator)       # accelerator.device is where prepare() puts model and batches

        model = job.task.model
        optimizer = job.make_optimizer(model.parameters())
        scheduler = job.make_scheduler(optimizer)
        loss_function = job.task.loss_fn
        training_dataloader = DataLoader(job.task.train_set, batch_size=job.batch_size, shuffle=True,
                                         num_workers=job.num_workers)
        validation_dataloader = DataLoader(job.task.val_set, batch_size=job.batch_size, num_workers=job.num_workers)
        net, optimizer, training_dataloader, scheduler = accelerator.prepare(
            model, optimizer, training_dataloader, scheduler)
        validation_dataloader = accelerator.prepare(validation_dataloader)

        step, epoch, batch_in_epoch = self._load(job, accelerator) if job.resume_from else (0, 0, 0)
        self._record(job, accelerator, net, training_dataloader, step, explicit=None)

        batches_per_epoch = len(training_dataloader)
        stop = False
        while step < job.max_steps and not stop:
            batches = (accelerator.skip_first_batches(training_dataloader, batch_in_epoch) if batch_in_epoch
                       else training_dataloader)
            for batch in batches:
                with accelerator.accumulate(net):
                    inputs, targets = batch
                    loss = self.training_loss(net, loss_function, inputs, targets)
                    accelerator.backward(loss)
                    if job.grad_clip is not None and accelerator.sync_gradients:
                        accelerator.clip_grad_norm_(net.parameters(), job.grad_clip)
                    optimizer.step()
                    scheduler.step()
                    optimizer.zero_grad()
                batch_in_epoch += 1
                if not accelerator.sync_gradients:
                    continue
                step += 1
                stop = self.after_optimizer_step(job, accelerator, step, model)
                if job.should_validate(step) or stop:
                    self._validate_defaults(accelerator, net, validation_dataloader)
                if job.should_checkpoint(step):
                    at_end = batch_in_epoch == batches_per_epoch
                    self._save_defaults(job, accelerator, step, epoch + at_end, 0 if at_end else batch_in_epoch)
                if step >= job.max_steps or stop:
                    break
            else:
                epoch, batch_in_epoch = epoch + 1, 0
        self._finish(accelerator, step)

    # ------------------------------------------------------------------ where a user's own loop changes
    def training_loss(self, net: torch.nn.Module, loss_fn: torch.nn.Module, x: torch.Tensor,
                      y: torch.Tensor) -> torch.Tensor:
        """One micro-batch's loss (`accelerator.backward` divides it for accumulation)."""
        return loss_fn(net(x), y)

    def after_optimizer_step(self, job: TrainJob, accelerator, step: int, model: torch.nn.Module) -> bool:
        """Called once after each optimizer step (and the scheduler's) with the unwrapped model; True ends training
        after this step (the same answer on every process)."""
        return False

    # ------------------------------------------------------------------ shared by both
    def _after_step(self, job: TrainJob, accelerator, step: int, epoch: int, batch_in_epoch: int,
                    batches_per_epoch: int, validate, stop: bool = False) -> None:
        """After optimizer step `step`: validate at the job's cadence and when training stops early, checkpoint at
        the job's cadence (the checkpoint records the data position: the next epoch when this step ended one)."""
        if job.should_validate(step) or stop:
            validate()
        if job.should_checkpoint(step):
            at_end = batch_in_epoch == batches_per_epoch
            self._save(job, accelerator, step, epoch + at_end, 0 if at_end else batch_in_epoch)

    @staticmethod
    def _check_device(job: TrainJob, accelerator) -> None:
        if not same_device(accelerator.device, job.device):
            raise UnsupportedCombination(
                f"accelerate chose device {accelerator.device} but evalkit asked for {job.device} "
                "(ACCELERATE_TORCH_DEVICE or CUDA_VISIBLE_DEVICES set?)", UnsupportedCombination.SUBSTITUTION)

    def _finish(self, accelerator, step: int) -> None:
        accelerator.wait_for_everyone()
        self._effective["scaler"] = ({"enabled": True, "scale": float(accelerator.scaler.get_scale())}
                                     if accelerator.scaler is not None else None)
        self._effective["final_step"] = step

    def _check_order(self, job: TrainJob, train_dl, sampler: GlobalOrderSampler, epoch: int) -> None:
        """Accelerate's sharding of the global order must reproduce evalkit's per-rank order."""
        sampler.set_epoch(epoch)
        got = [i for batch in train_dl.batch_sampler for i in batch]
        want = job.train_sampler(epoch).rank_indices(epoch).tolist()
        if got != want:
            raise RuntimeError("accelerate's batch sharding no longer yields evalkit's per-rank order "
                               f"(rank {job.rank}, epoch {epoch}); the aligned data order cannot be kept")

    @torch.no_grad()
    def _validate_aligned(self, job: TrainJob, accelerator, model: torch.nn.Module) -> None:
        """Forward evalkit's validation shards (as the baseline) in eval mode; evalkit's observers compute the
        metrics."""
        model.eval()
        for x, _ in job.val_loader():
            with accelerator.autocast():
                model(x.to(accelerator.device, non_blocking=True))
        model.train()

    @staticmethod
    def _validate_defaults(accelerator, model: torch.nn.Module, validation_dataloader) -> None:
        """The quicktour's distributed evaluation: the prepared model called on the prepared validation loader in
        the mode training left it in (the page calls neither `model.eval()` nor `model.train()`), predictions and
        targets gathered with `gather_for_metrics`; the metric is evalkit's, from its hooks. Under `no_grad`, the
        one departure (observation): see `DEPARTURES`."""
        for inputs, targets in validation_dataloader:
            with torch.no_grad():
                predictions = model(inputs)
            accelerator.gather_for_metrics((predictions, targets))

    # ------------------------------------------------------------------ checkpoints
    def _save(self, job: TrainJob, accelerator, step: int, epoch: int, batch_in_epoch: int) -> None:
        out = os.path.join(job.ckpt_dir, f"step_{step:08d}")
        accelerator.save_state(out, safe_serialization=True)
        self._write_position(job, accelerator, out, step, epoch, batch_in_epoch)

    def _save_defaults(self, job: TrainJob, accelerator, step: int, epoch: int, batch_in_epoch: int) -> None:
        """`accelerator.save_state(dir)` as the checkpointing guide writes it, then evalkit's position file."""
        out = os.path.join(job.ckpt_dir, f"step_{step:08d}")
        accelerator.save_state(out)
        self._write_position(job, accelerator, out, step, epoch, batch_in_epoch)

    def _write_position(self, job: TrainJob, accelerator, out: str, step: int, epoch: int,
                        batch_in_epoch: int) -> None:
        """evalkit's position file beside the state. Where Accelerate did not join the launched ranks (defaults on
        CPU), every rank is its own main process and writes the same directory: each through a temporary file of
        its own."""
        accelerator.wait_for_everyone()
        if accelerator.is_main_process:
            tmp = os.path.join(out, f"{POSITION_FILE}.{os.getpid()}.tmp")
            with open(tmp, "w") as fh:
                json.dump({"format": POSITION_FORMAT, "step": step, "epoch": epoch,
                           "batch_in_epoch": batch_in_epoch, "mode": self.mode,
                           "world_size": job.world_size, "grad_accum": job.grad_accum}, fh)
            os.replace(tmp, os.path.join(out, POSITION_FILE))
        accelerator.wait_for_everyone()

    def _load(self, job: TrainJob, accelerator) -> tuple[int, int, int]:
        state_dir = resolve_state_dir(job.resume_from)
        with open(os.path.join(state_dir, POSITION_FILE)) as fh:
            position = json.load(fh)
        if position.get("format") != POSITION_FORMAT:
            raise CorruptCheckpoint(f"{state_dir}: unknown position format {position.get('format')!r}")
        accelerator.load_state(state_dir)
        self._effective["resumed_from"] = os.path.abspath(state_dir)
        self._effective["resumed_position"] = position
        return position["step"], position["epoch"], position["batch_in_epoch"]

    # ------------------------------------------------------------------ effective config
    def _record(self, job: TrainJob, accelerator, net, train_dl, start_step: int, explicit: dict | None) -> None:
        import accelerate

        state = accelerator.state
        grad_state = accelerator.gradient_state
        report: dict[str, Any] = {
            "wrapper": "accelerate", "version": accelerate.__version__,
            "loop": "hand-written Accelerate loop (adapters/accelerate_loop.py)",
            "distributed_type": str(accelerator.distributed_type),
            "backend": getattr(state, "backend", None),
            "num_processes": accelerator.num_processes, "process_index": accelerator.process_index,
            "local_process_index": accelerator.local_process_index, "device": str(accelerator.device),
            "mixed_precision": accelerator.mixed_precision, "native_amp": accelerator.native_amp,
            "autocast_dtype": str(job.precision.autocast_dtype) if job.precision.autocast_dtype else None,
            "grad_scaler": accelerator.scaler is not None,
            "gradient_accumulation_steps": accelerator.gradient_accumulation_steps,
            "gradient_state": dict(grad_state.plugin_kwargs),
            "split_batches": accelerator.split_batches,
            "dataloader_config": _as_dict(getattr(accelerator, "dataloader_config", None)),
            "step_scheduler_with_optimizer": accelerator.step_scheduler_with_optimizer,
            "rng_types": list(accelerator.rng_types or []),
            "ddp_kwargs": accelerator.ddp_handler.to_dict() if accelerator.ddp_handler is not None else None,
            "scaler_kwargs": (accelerator.scaler_handler.to_dict()
                              if accelerator.scaler_handler is not None else None),
            "model_wrapper": type(net).__name__,
            "project_configuration": _as_dict(accelerator.project_configuration),
            "train_batches_per_epoch_per_rank": len(train_dl),
            "torch_num_threads": torch.get_num_threads(),
            "state": repr(state),
            "max_steps": job.max_steps, "val_every": job.val_every, "ckpt_every": job.ckpt_every,
            "grad_clip": job.grad_clip, "start_step": start_step, "world_size": job.world_size,
            "checkpoint_format": "accelerate save_state directory step_XXXXXXXX/ (model.safetensors, "
                                 "optimizer.bin, scheduler.bin, scaler.pt, random_states_<rank>.pkl) + "
                                 f"{POSITION_FILE}",
            "checkpoint_loading": "load_state: safetensors for the model, torch.load(weights_only=True) for "
                                  "optimizer/scheduler/scaler/RNG; the position file is JSON",
        }
        self.record_deviations(*normalization_deviations(job, self.mode), "precision.fp32_outputs",
                               *state_deviations(accelerator))
        if explicit is None:
            report["accelerator_arguments"] = defaults_arguments(job)
            joined = accelerator.num_processes == job.world_size
            self.record_deviations(*([] if joined else ["ddp"]), *DEFAULTS_DEVIATIONS,
                                   *(["val.repeated"] if job.world_size > 1 else []))
        self.explicit_settings = explicit
        self._effective.update(report)
