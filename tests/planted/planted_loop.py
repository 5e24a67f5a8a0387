"""A copy of the baseline loop that plants ONE known wrong training semantics, for the semantic probe's tests.

`PlantedAdapter(mode=..., options={"wrong": NAME})`; NAME is one of `WRONGS` ("none" = the baseline's semantics:
windows of `grad_accum` micro-batches, shorter at epoch end, each loss divided by the window's size (on a token task,
weighted by its tokens over the window's: the token mean over the window, `BaselineAdapter.token_weights`); clip after
unscale; the scheduler stepped once per optimizer step; validation every `val_every` steps and at the end).
The report names the planted wrong but reports no `deviations`: the probe must find it from the records.
Checkpoints are not written and resuming is refused: the probe never resumes.
"""
from __future__ import annotations

import contextlib
import itertools
import warnings
from typing import Any, Iterator

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Sampler
from torch.utils.data.distributed import DistributedSampler

from evalkit.adapters.baseline import BaselineAdapter
from evalkit.contract import TrainJob, WrapperAdapter
from evalkit.worker.optim import WarmupSchedule

WRONGS: dict[str, str] = {
    "none": "the baseline's semantics",
    "lr.per_micro_batch": "scheduler stepped after every micro-batch",
    "lr.per_epoch": "scheduler stepped once at each epoch end only",
    "lr.twice_per_step": "scheduler stepped twice per optimizer step",
    "lr.warmup_off_by_one": "scheduler stepped once before training",
    "lr.warmup_unit": "warm-up and total lengths counted in micro-batches, stepped per optimizer step",
    "loss.window_summed": "micro-batch losses not divided by the window size",
    "window.short_underscaled": "every loss divided by grad_accum, also in a short window",
    "window.short_dropped": "the short last window of each epoch skipped (not forwarded)",
    "window.short_carried": "windows of grad_accum micro-batches run across epoch boundaries",
    "window.short_merged": "windows counted from each epoch's start; the short remainder joins the next epoch's first "
                           "window (divided by that window's size)",
    "clip.unasked": "clip_grad_norm_ at 0.5 every step, also when no clipping was asked",
    "clip.per_micro_batch": "each micro-batch's gradient contribution clipped instead of the window's",
    "clip.before_unscale": "a GradScaler (scale 16) even in fp32, gradients clipped before unscaling",
    "wd.unasked": "coupled weight decay 0.01 added to the gradient",
    "ddp.grad_summed": "gradients summed over ranks instead of averaged",
    "order.shuffled": "a permutation per epoch seeded seed * 31 + epoch + 12345",
    "order.fixed_seed": "a permutation per epoch seeded 42 + epoch whatever the seed",
    "order.distributed_interleave": "DistributedSampler(shuffle=True) order, ranks interleaved",
    "order.padded": "DistributedSampler(shuffle=False) padding: a sample repeated across ranks",
    "forward.before_training": "one validation pass before the first optimizer step",
    "forward.extra_train": "one extra grad-enabled forward per optimizer step, not back-propagated",
    "val.train_mode": "validation forwards in train mode",
    "val.cadence": "validation every val_every micro-batches (and at the end)",
    "steps.extra": "one optimizer step more than max_steps",
    "steps.fewer": "one optimizer step fewer than max_steps",
    "precision.mismatch": "autocast bfloat16 although fp32 was asked",
    "unexplained": "every update scaled by 0.9",
    # the optimizer the loop builds itself, as wrappers that build theirs from arguments do (issue 29)
    "optim.other": "torch.optim.Adam (weight decay coupled) whatever optimizer the run names",
    "optim.hyper": "the run's optimizer with other hyperparameters (SGD momentum 0.9, Adam betas (0.9, 0.95))",
    "optim.unoptimized": "the last layer's bias left out of the optimizer",
    "wd.skipped": "two param groups, biases without weight decay (the transformers Trainer's grouping)",
    "lr.per_group": "two param groups, the biases' LR twice the others'",
    "lr.warmup_from_zero": "the 'linear schedule with warmup' convention: LR factor step/warmup, 0 at step 1",
    # the loss normalization on a token task (tiny_lm; on other tasks these are the baseline's or loss.window_summed)
    "loss_norm.micro_mean": "the mean of micro-batch means: each micro-batch's token mean divided by the window's size",
    "loss_norm.micro_sum": "micro-batch token means summed, not divided (a compute_loss ignoring num_items_in_batch)",
    "loss_norm.token_sum": "each micro-batch's token losses summed (its mean times its tokens), never divided",
    "loss_norm.accum_scaled": "the token mean over the window multiplied by grad_accum",
}
UNASKED_CLIP_NORM = 0.5
UNASKED_WEIGHT_DECAY = 0.01
UNEXPLAINED_FACTOR = 0.9
BEFORE_UNSCALE_SCALE = 2.0 ** 4


def planted_wrong(options: dict[str, Any]) -> str:
    """`options["wrong"]` (default "none"), or a ValueError naming the valid ones."""
    wrong = options.get("wrong", "none")
    if wrong not in WRONGS:
        raise ValueError(f"trainer.options.wrong={wrong!r} is not one of {', '.join(WRONGS)}")
    return wrong


class PadFirstSampler(DistributedSampler):
    """DistributedSampler(shuffle=False, drop_last=False), its padding (repeats of the first samples) placed first
    instead of last, so that a loader dropping the incomplete last batch still serves it: with 41 samples on 2
    ranks, sample 0 opens both ranks' first micro-batch."""

    def __init__(self, dataset, num_replicas: int, rank: int):
        super().__init__(dataset, num_replicas=num_replicas, rank=rank, shuffle=False, drop_last=False)

    def __iter__(self) -> Iterator[int]:
        n = len(self.dataset)
        padded = (list(range(n)) * (self.total_size // n + 1))[: self.total_size - n] + list(range(n))
        return iter(padded[self.rank:self.total_size:self.num_replicas])


class _Permuted(Sampler[int]):
    """This rank's share of one epoch's permutation, cut like evalkit's order (rank r takes the r-th slice of
    `batch_size` samples of each global batch; an incomplete last global batch is dropped)."""

    def __init__(self, n: int, seed: int, batch_size: int, rank: int, world_size: int):
        per_batch = batch_size * world_size
        used = torch.randperm(n, generator=torch.Generator().manual_seed(seed))[: n // per_batch * per_batch]
        self.indices = used.view(-1, world_size, batch_size)[:, rank].reshape(-1).tolist()

    def __iter__(self) -> Iterator[int]:
        return iter(self.indices)

    def __len__(self) -> int:
        return len(self.indices)


class PlantedAdapter(WrapperAdapter):
    option_names = ("wrong",)   # the planted variant (WRONGS)
    def __init__(self, mode: str = "aligned", options: dict[str, Any] | None = None):
        super().__init__(mode, options)
        self.wrong = planted_wrong(self.options)

    # ------------------------------------------------------------------ the loop
    def fit(self, job: TrainJob) -> None:
        if job.resume_from:
            raise ValueError("the planted loop writes no checkpoints and cannot resume")
        device = job.device
        if device.type == "cuda":
            torch.cuda.set_device(device)
        if job.distributed and not dist.is_initialized():
            if device.type == "cuda":
                dist.init_process_group("nccl", device_id=device)
            else:
                dist.init_process_group("gloo")

        model = job.task.model.to(device)
        net = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None) \
            if job.distributed else model
        optimizer = self._optimizer(job, model)
        scheduler = self._scheduler(job, optimizer)
        scaler = torch.amp.GradScaler(device.type, enabled=job.precision.grad_scaler) \
            if self.wrong != "clip.before_unscale" else \
            torch.amp.GradScaler(device.type, init_scale=BEFORE_UNSCALE_SCALE, growth_interval=2 ** 30)
        max_steps = job.max_steps + {"steps.extra": 1, "steps.fewer": -1}.get(self.wrong, 0)
        self._record_settings(job)

        model.train()
        if self.wrong == "lr.warmup_off_by_one":
            with warnings.catch_warnings():      # torch warns of a scheduler step before any optimizer step
                warnings.simplefilter("ignore", UserWarning)
                scheduler.step()
        if self.wrong == "forward.before_training":
            self._validate(job, model)
        step, micro_batches = 0, 0
        windows = self._windows(job)
        while step < max_steps:
            window, ends_epoch = next(windows)
            weights = self._token_weights(job, [y for _, y in window])
            for i, (x, y) in enumerate(window):
                x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
                self._micro_batch(job, net, model, scaler, x, y, len(window), last=i == len(window) - 1,
                                  weight=weights[i] if weights else None)
                micro_batches += 1
                if self.wrong == "val.cadence" and job.val_every > 0 and micro_batches % job.val_every == 0:
                    self._validate(job, model)
            if self.wrong == "forward.extra_train":
                x, y = (t.to(device, non_blocking=True) for t in window[0])
                job.task.loss_fn(model(x), y)          # a grad-enabled forward whose loss nobody back-propagates
            self._optimizer_step(job, model, optimizer, scaler)
            # lr.per_micro_batch: one scheduler step per micro-batch of the window, all after the optimizer step
            # (a step taken between two backward passes changes nothing until the optimizer steps).
            scheduler_steps = {"lr.per_micro_batch": len(window), "lr.per_epoch": 0, "lr.twice_per_step": 2}
            for _ in range(scheduler_steps.get(self.wrong, 1)):
                scheduler.step()
            if self.wrong == "lr.per_epoch" and ends_epoch:
                scheduler.step()
            step += 1
            if step == max_steps or (self.wrong != "val.cadence" and job.val_every > 0
                                     and step % job.val_every == 0):
                self._validate(job, model)
        if job.distributed:
            dist.barrier()

    def _optimizer(self, job: TrainJob, model: torch.nn.Module) -> torch.optim.Optimizer:
        """The job's optimizer, or for an `optim.*`, `wd.skipped` or `lr.per_group` variant the planted one."""
        recipe, named = job.recipe, list(model.named_parameters())
        if self.wrong == "optim.other":
            return torch.optim.Adam(model.parameters(), lr=recipe.lr, weight_decay=recipe.weight_decay)
        if self.wrong == "optim.hyper":
            if recipe.optimizer == "sgd":
                return torch.optim.SGD(model.parameters(), lr=recipe.lr, momentum=0.9,
                                       weight_decay=recipe.weight_decay)
            return torch.optim.AdamW(model.parameters(), lr=recipe.lr, betas=(0.9, 0.95),
                                     weight_decay=recipe.weight_decay)
        if self.wrong == "optim.unoptimized":
            return job.make_optimizer([p for _, p in named[:-1]])
        if self.wrong in ("wd.skipped", "lr.per_group"):
            optimizer = job.make_optimizer([p for n, p in named if not n.endswith("bias")])
            extra = {"weight_decay": 0.0} if self.wrong == "wd.skipped" else {"lr": 2 * recipe.lr}
            optimizer.add_param_group({"params": [p for n, p in named if n.endswith("bias")], **extra})
            return optimizer
        return job.make_optimizer(model.parameters())

    def _scheduler(self, job: TrainJob, optimizer: torch.optim.Optimizer):
        if self.wrong == "lr.warmup_from_zero":
            right = job.make_scheduler(torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)).lr_lambdas[0]
            return torch.optim.lr_scheduler.LambdaLR(
                optimizer, lambda s: s / right.warmup_steps if s < right.warmup_steps else right(s))
        if self.wrong != "lr.warmup_unit":
            return job.make_scheduler(optimizer)
        # The job's schedule, read off a scheduler built on a throw-away optimizer, its lengths in micro-batches.
        right = job.make_scheduler(torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)).lr_lambdas[0]
        wrong = WarmupSchedule(right.kind, right.warmup_steps * job.grad_accum, right.total_steps * job.grad_accum,
                               right.min_lr_ratio)
        return torch.optim.lr_scheduler.LambdaLR(optimizer, wrong)

    def _token_weights(self, job: TrainJob, targets: list[torch.Tensor]) -> list[float] | None:
        """Each micro-batch loss's weight on a token task (None: divided, by the window's size unless planted
        otherwise)."""
        right = BaselineAdapter.token_weights(job, targets)
        if right is None or self.wrong in ("loss_norm.micro_mean", "loss_norm.micro_sum"):
            return None
        if self.wrong == "loss_norm.token_sum":
            return [float(job.task.loss_terms(y)) for y in targets]
        return [w * job.grad_accum for w in right] if self.wrong == "loss_norm.accum_scaled" else right

    def _micro_batch(self, job: TrainJob, net, model, scaler, x, y, window: int, last: bool,
                     weight: float | None = None) -> None:
        """Forward and backward of one micro-batch of a `window`-long accumulation (its loss times `weight` when
        given, else divided)."""
        per_micro_clip = self.wrong == "clip.per_micro_batch" and job.grad_clip is not None
        # DDP all-reduces gradients only on the window's last backward (on every one when each is clipped).
        synced = last or not job.distributed or per_micro_clip
        with contextlib.nullcontext() if synced else net.no_sync():
            with self._autocast(job):
                loss = job.task.loss_fn(net(x), y)
            divisor = {"loss.window_summed": 1, "loss_norm.micro_sum": 1,
                       "window.short_underscaled": job.grad_accum}.get(self.wrong, window)
            loss = loss / divisor if weight is None else loss * weight
            if not per_micro_clip:
                scaler.scale(loss).backward()
                return
            accumulated = [p.grad for p in model.parameters()]
            for p in model.parameters():
                p.grad = None
            scaler.scale(loss).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), job.grad_clip)
            for p, before in zip(model.parameters(), accumulated):
                if before is not None:
                    p.grad = before if p.grad is None else p.grad + before

    def _optimizer_step(self, job: TrainJob, model, optimizer, scaler) -> None:
        params = [p for p in model.parameters() if p.grad is not None]
        if self.wrong == "clip.before_unscale" and job.grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(params, job.grad_clip)     # on the scaled gradients
        else:
            norms = [job.grad_clip] if job.grad_clip is not None and self.wrong != "clip.per_micro_batch" else []
            norms += [UNASKED_CLIP_NORM] if self.wrong == "clip.unasked" else []
            if norms:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(params, min(norms))
        with torch.no_grad():
            for p in params:
                if self.wrong == "wd.unasked":
                    p.grad += UNASKED_WEIGHT_DECAY * p
                elif self.wrong == "ddp.grad_summed":
                    p.grad *= job.world_size
                elif self.wrong == "unexplained":
                    p.grad *= UNEXPLAINED_FACTOR
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)

    def _autocast(self, job: TrainJob) -> contextlib.AbstractContextManager:
        if self.wrong == "precision.mismatch":
            return torch.autocast(job.device.type, dtype=torch.bfloat16)
        return job.precision.autocast(job.device)

    # ------------------------------------------------------------------ data
    def _windows(self, job: TrainJob) -> Iterator[tuple[list, bool]]:
        """The micro-batches of each optimizer step, and whether an epoch ended with the step's last one."""
        window: list = []
        for epoch in itertools.count():
            loader = self._epoch_loader(job, epoch)
            per_epoch = len(loader)
            for i, batch in enumerate(loader):
                window.append(batch)
                ends_epoch = i == per_epoch - 1
                if self.wrong == "window.short_merged":
                    if (i + 1) % job.grad_accum == 0:
                        yield window, ends_epoch
                        window = []
                    continue
                if len(window) == job.grad_accum or (ends_epoch and self.wrong != "window.short_carried"):
                    if len(window) == job.grad_accum or self.wrong != "window.short_dropped":
                        yield window, ends_epoch
                    window = []

    def _epoch_loader(self, job: TrainJob, epoch: int) -> DataLoader:
        train_set, ranks = job.task.train_set, (job.world_size, job.rank)
        if self.wrong in ("order.shuffled", "order.fixed_seed"):
            seed = job.seed * 31 + epoch + 12345 if self.wrong == "order.shuffled" else 42 + epoch
            sampler: Sampler[int] = _Permuted(len(train_set), seed, job.batch_size, job.rank, job.world_size)
        elif self.wrong == "order.distributed_interleave":
            sampler = DistributedSampler(train_set, *ranks, shuffle=True, seed=job.seed, drop_last=False)
            sampler.set_epoch(epoch)
        elif self.wrong == "order.padded":
            sampler = PadFirstSampler(train_set, *ranks)
        else:
            return job.train_loader(epoch)
        return DataLoader(train_set, batch_size=job.batch_size, sampler=sampler, drop_last=True,
                          num_workers=job.num_workers, pin_memory=job.pin_memory)

    @torch.no_grad()
    def _validate(self, job: TrainJob, model: torch.nn.Module) -> None:
        """Forward the validation split in eval mode (train mode under val.train_mode) without grad."""
        if self.wrong != "val.train_mode":
            model.eval()
        for x, _ in job.val_loader():
            with self._autocast(job):
                model(x.to(job.device, non_blocking=True))
        model.train()

    def _record_settings(self, job: TrainJob) -> None:
        """What was planted; no `deviations`: the probe must find the difference from the records."""
        self._effective.update({"planted": self.wrong, "loop": "planted (tests/planted/planted_loop.py)",
                                "world_size": job.world_size})
