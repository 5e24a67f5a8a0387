"""What evalkit hands an adapter (`TrainJob`) and what it expects back (`Adapter`; `WrapperAdapter` implements it).

An adapter runs one training wrapper on one evalkit task. evalkit owns the task, the data order, the
optimizer and scheduler factories, the clocks, the hooks and the memory readings; the adapter owns
only the wrapper. A third-party adapter is one class with the two methods of `Adapter`, selected by
`trainer._target_=my_pkg.MyAdapter` (or a YAML in `conf/trainer/`), constructed as
`MyAdapter(mode=..., options=...)`. What the wrapper needs is the trainer config's to say, never the class's
(`requirements`, `modules`; `evalkit.trainers`): checked before launch and before construction (a missing one
ends the job with the install command), imported before the task is built, and the versions recorded.
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Any, Callable, Optional, Protocol, runtime_checkable

import torch
import torch.distributed
from torch.utils.data import DataLoader

from evalkit.contract.adapter_class import check_mode
from evalkit.contract.effective import Departure, Deviation, EffectiveConfig, QuickStartPage
from evalkit.contract.options import declared_in, unknown_options
from evalkit.tasks.catalog import Task
from evalkit.tasks.order import OrderedSampler, ValSampler


@dataclass(frozen=True)
class Precision:
    name: str                               # fp32 | bf16_mixed | fp16_mixed
    autocast_dtype: Optional[torch.dtype]   # None for fp32
    grad_scaler: bool                       # dynamic loss scaling (fp16)

    def autocast(self, device: torch.device) -> contextlib.AbstractContextManager:
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device.type, dtype=self.autocast_dtype)


@dataclass(frozen=True)
class Recipe:
    """The optimizer and LR schedule the run asks for (`train.*`), for a defaults adapter whose quick start lets
    the wrapper build them from its own arguments (`TrainingArguments(learning_rate=..., optim=...)`): evalkit
    translates these, and only these, so every setting the run leaves open keeps the wrapper's default."""

    optimizer: str = "adamw"              # adamw | adam | sgd
    lr: float = 1e-3
    weight_decay: float = 0.0
    momentum: float = 0.9                 # sgd
    betas: tuple[float, float] = (0.9, 0.999)
    schedule: str = "cosine"              # constant | linear | cosine
    warmup_steps: int = 5
    min_lr_ratio: float = 0.0

    @classmethod
    def of(cls, train: Any) -> "Recipe":
        """From a `train` config (a key it lacks keeps the field's default)."""
        d = cls()
        betas = train.get("betas", d.betas)
        return cls(str(train.get("optimizer", d.optimizer)), float(train.get("lr", d.lr)),
                   float(train.get("weight_decay", d.weight_decay)), float(train.get("momentum", d.momentum)),
                   (float(betas[0]), float(betas[1])), str(train.get("schedule", d.schedule)),
                   int(train.get("warmup_steps", d.warmup_steps)), float(train.get("min_lr_ratio", d.min_lr_ratio)))


def no_value_sink(name: str, value: float) -> None:
    """Where `TrainJob.log_value` goes outside a worker (a TrainJob built by hand): nowhere."""


@dataclass
class TrainJob:
    """Everything an adapter needs to train. Max steps, validation and checkpoint cadences count
    optimizer steps. `resume_from` is a checkpoint the adapter itself wrote into a `ckpt_dir`."""

    task: Task
    make_optimizer: Callable[[Any], torch.optim.Optimizer]      # params -> optimizer
    make_scheduler: Callable[[torch.optim.Optimizer], Any]      # optimizer -> LR scheduler (per optimizer step)
    precision: Precision
    device: torch.device
    batch_size: int                 # per device
    grad_accum: int
    grad_clip: Optional[float]      # max global grad norm (after unscaling), None = off
    max_steps: int
    val_every: int                  # 0 = only at the end
    ckpt_every: int                 # 0 = only at the end
    ckpt_dir: str
    resume_from: Optional[str]
    seed: int
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    nnodes: int = 1                 # nodes the ranks span (distributed.nnodes), the same number of ranks on each
    mode: str = "aligned"           # aligned | defaults
    num_workers: int = 0
    compile: bool = False           # torch.compile the model the way the wrapper's documentation does (train.compile)
    # A value the adapter's own code reports (a custom callback's, say): recorded with the number of optimizer
    # steps evalkit had observed at the call, as `records/values_rank0.csv` and a metric of that name.
    log_value: Callable[[str, float], None] = no_value_sink
    recipe: Recipe = Recipe()       # what make_optimizer / make_scheduler build, as settings

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def ranks_per_node(self) -> int:
        """The ranks on this rank's node (a wrapper's `devices` where it counts per node, with `num_nodes`)."""
        return self.world_size // self.nnodes

    @property
    def pin_memory(self) -> bool:
        """Page-locked batches on CUDA, so the loops' `non_blocking=True` copies overlap with compute."""
        return self.device.type == "cuda"

    def train_sampler(self, epoch: int = 0, start_batch: int = 0) -> OrderedSampler:
        return OrderedSampler(len(self.task.train_set), self.batch_size, self.seed, self.rank,
                              self.world_size, epoch=epoch, start_batch=start_batch)

    def loader_generator(self, epoch: int = 0) -> torch.Generator:
        """A generator of the loader's own for the seed a DataLoader draws when an iterator starts: drawn from
        torch's global RNG instead, that seed would shift the RNG dropout uses, and a resumed run (whose iterator
        starts after the RNG was restored) would not continue bit for bit. Aligned adapters that build their own
        DataLoader pass it too."""
        return torch.Generator().manual_seed(self.seed + epoch)

    def train_loader(self, epoch: int = 0, start_batch: int = 0) -> DataLoader:
        """This rank's micro-batches in evalkit's order (`OrderedSampler`, evalkit.tasks.order), seeded by
        `loader_generator`."""
        return DataLoader(self.task.train_set, batch_size=self.batch_size,
                          sampler=self.train_sampler(epoch, start_batch), drop_last=True,
                          num_workers=self.num_workers, pin_memory=self.pin_memory,
                          generator=self.loader_generator(epoch))

    def val_loader(self) -> DataLoader:
        return DataLoader(self.task.val_set, batch_size=self.batch_size,
                          sampler=ValSampler(len(self.task.val_set), self.rank, self.world_size),
                          num_workers=self.num_workers, pin_memory=self.pin_memory,
                          generator=self.loader_generator())

    def token_weights(self, targets: list[torch.Tensor]) -> list[float] | None:
        """Each micro-batch's weight in its window's token mean: its loss terms x world size / the window's terms on
        all ranks (DDP averages the ranks' gradients, so each rank's share is scaled back up by the world size);
        a window of one micro-batch on one rank weighs 1.0 exactly. None when the task's loss has a fixed number of
        terms per sample (`task.loss_terms` unset): a loop divides by the window's size."""
        if self.task.loss_terms is None:
            return None
        terms = [self.task.loss_terms(y) for y in targets]
        total = torch.tensor(float(sum(terms)), dtype=torch.float64, device=self.device)
        if self.distributed:
            torch.distributed.all_reduce(total)
        return [n * self.world_size / (float(total) or 1.0) for n in terms]

    def should_validate(self, step: int) -> bool:
        return step == self.max_steps or (self.val_every > 0 and step % self.val_every == 0)

    def should_checkpoint(self, step: int) -> bool:
        return step == self.max_steps or (self.ckpt_every > 0 and step % self.ckpt_every == 0)

    def checkpoint_path(self, step: int, suffix: str = ".pt") -> str:
        return os.path.join(self.ckpt_dir, f"step_{step:08d}{suffix}")


@runtime_checkable
class Adapter(Protocol):
    """Runs one wrapper on one evalkit task.

    - `fit(job)`: train `job.task.model` (the instance evalkit built and hooked; wrap it, never rebuild it)
      for `job.max_steps` optimizer steps on `job.train_loader()` order, with `job.make_optimizer` /
      `job.make_scheduler`, computing the training loss with `job.task.loss_fn`; validate on
      `job.val_loader()` by calling the model in eval mode without grad (evalkit computes the metrics
      from the outside); checkpoint into `job.ckpt_dir`; resume from `job.resume_from` when set.
      Never time itself, never read memory, never talk to a tracking server.
    - `effective_config()`: what the wrapper itself reports it did, after fit (`EffectiveConfig`, or a plain dict
      read as one); in `aligned` mode it includes `explicit_settings`: every knob set to match the baseline's
      semantics; `deviations`: the known differences that apply to the job.
    The versions recorded and the modules imported before the task is built (their memory is the import footprint,
    not training memory) are the trainer config's `requirements` and `modules`, not the class's.
    """

    def fit(self, job: TrainJob) -> None: ...

    def effective_config(self) -> EffectiveConfig | dict[str, Any]: ...


class AdapterUnavailable(RuntimeError):
    """The wrapper an adapter needs is not installed (the message says what to install)."""


class UnsupportedCombination(RuntimeError):
    """The wrapper cannot run this combination (e.g. a precision on this hardware); the run is refused.

    `kind` says why, at the message's end (`[refusal: <kind>]`, read by the functional probe from the failure reason):
    - DOCUMENTED: the wrapper's documentation says it does not support it; `documented_at` names where: a page of
      that documentation (an http(s) URL under the trainer YAML's `docs`). The only refusal the probes exempt ("not
      claimed", "not judged"); a citation off those pages is judged, not raised on, as an undocumented refusal
      (evalkit.probes.refusals);
    - SUBSTITUTION: the wrapper would run something other than asked (another precision, device or world size),
      silently or with a warning: the capability is missing, so its item fails (as it does in defaults mode, where
      the substitution itself is observed);
    - "" (not said): no exemption either.
    """

    DOCUMENTED = "documented-unsupported"
    SUBSTITUTION = "silent-substitution"

    def __init__(self, message: str, kind: str = "", documented_at: str = ""):
        if kind not in ("", self.DOCUMENTED, self.SUBSTITUTION):
            raise ValueError(f"unknown refusal kind {kind!r}")
        if (kind == self.DOCUMENTED) != bool(documented_at):
            raise ValueError("a documented refusal names where the wrapper documents it (documented_at), and only it")
        self.kind, self.documented_at = kind, documented_at
        where = f", see {documented_at}" if documented_at else ""
        super().__init__(f"{message} [refusal: {kind}{where}]" if kind else message)


def same_device(a: torch.device, b: torch.device) -> bool:
    """Whether two devices are one (a CPU's index means nothing: `cpu` is `cpu:0`)."""
    return a.type == b.type and (a.type == "cpu" or a.index == b.index)


class WrapperAdapter:
    """The part every bundled adapter shares: the mode, the options, and `effective_config()` from what `fit` fills
    in (`self._effective`: the wrapper's own report; `self.explicit_settings`; `record_deviations`). Subclasses add
    `fit`. What the wrapper needs (installed, imported, versions) is the trainer YAML's (`evalkit.trainers`).

    Class attributes, each written once:
    - `deviations`: every difference from the baseline's semantics the adapter knows of (`Deviation(code, text)`);
      `fit` reports those that apply to its job with `record_deviations(code, ...)`, and the semantic probe matches
      its findings to them by code;
    - `aligns`: finding code or family -> the wrapper's setting that aligns it (named beside each finding);
    - `quick_start` cites the pages defaults mode follows and `departures` lists, once, each place where evalkit owns
      something the page writes otherwise; both land in the effective config of every defaults job;
    - `option_names`: the keys of `trainer.options` the class reads (a subclass or mixin adds its own); any other
      key is refused, at compose time and here (`evalkit.contract.options`). A class that declares none is not
      checked.
    `ended_by` (None): set it in `fit` to the reason when training stops before `job.max_steps` on purpose (a stop
    callback the user asked for, a time limit); a fit that returns short of `max_steps` without it fails the run
    ("trained 3 of 6 optimizer steps")."""

    deviations: tuple[Deviation, ...] = ()
    aligns: dict[str, str] = {}
    quick_start: tuple[QuickStartPage, ...] = ()
    departures: tuple[Departure, ...] = ()
    ended_by: str | None = None

    def __init__(self, mode: str = "aligned", options: dict[str, Any] | None = None):
        self.mode = check_mode(mode)
        self.options = dict(options or {})
        unknown = unknown_options(self.options, declared_in(type(self).__mro__), type(self).__name__)
        if unknown:
            raise ValueError("; ".join(unknown))
        self._effective: dict[str, Any] = {}
        self.explicit_settings: dict[str, Any] | None = None
        self._applying: dict[str, Deviation] = {}

    def record_deviations(self, *codes: str) -> None:
        """Report these of `deviations` as applying to this job (a code not in `deviations` is a KeyError: every
        deviation's text is written there, once)."""
        known = {d.code: d for d in self.deviations}
        for code in codes:
            self._applying[code] = known[code]

    def effective_config(self) -> EffectiveConfig:
        defaults = self.mode == "defaults"
        return EffectiveConfig(mode=self.mode, deviations=list(self._applying.values()), aligns=dict(self.aligns),
                               explicit_settings=self.explicit_settings,
                               quick_start=list(self.quick_start) if defaults else [],
                               departures=list(self.departures) if defaults else [], details=dict(self._effective))
