"""The semantic probe's oracle: what a careful loop does at the truth caliber, step by step, in float64.

Expected (from evalkit's definitions, never from an adapter): the LR of optimizer step k is
`lr * factor(k - 1)`, the schedule written out here from its documented definition (`evalkit.worker.optim`'s
docstring; not its code); the data order is `OrderedSampler`'s, cut per epoch into windows of `grad_accum`
micro-batches with one short window at the epoch's end (the same windows on every rank); validation after every
`val_every` steps and after the last; `max_steps` steps in all. The expected update of step k is
`-lr_k * clip(g_k)`, g_k the mean over ranks of the mean over the window's micro-batches of each micro-batch's
mean loss gradient; on a task whose batches hold different numbers of loss terms (`Task.loss_terms`: the token
caliber's padded sequences), g_k is the token mean over the WHOLE window: the sum over ranks and micro-batches of
each micro-batch's token-mean gradient times its target tokens, over the window's target tokens on all ranks. It is
computed on a float64 copy of the task's model at the OBSERVED parameters before the step (the task's initial ones for
step 1), for the samples the observers SAW and the OBSERVED LR, so that an order or LR difference is named once and
does not cascade into update findings.

Tolerance (parameters are stored as float32 values): an update matches when
`|Δobs - Δpred| <= UPDATE_REL_TOL * |Δpred| + ULP_FACTOR * |ulp(θ_k)|` (norms over all parameters); LRs match within
LR_REL_TOL relative (they are recorded as the optimizer's float64 values). Its calibration on real baseline and
wrapper runs, with the figures: docs/probes/semantics.md, "Thresholds and their calibration".
"""
from __future__ import annotations

import copy
import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from omegaconf import OmegaConf

from evalkit.probes.evidence import JobEvidence
from evalkit.tasks.order import OrderedSampler
from evalkit.tasks.schemas import builder_arguments

UPDATE_REL_TOL = 2e-4      # relative to |Δpred|: the float32 loop's rounding (measured about 1e-5 at worst)
ULP_FACTOR = 4.0           # times |ulp(θ_k)| (norm over coordinates): the stored float32 parameters' rounding
LR_REL_TOL = 1e-6          # observed LRs are the optimizer's float64 values
CLIP_QUANTILE = 10         # percent: where among the oracle's windows' largest partial sums (clip seed) the job clips


@dataclass(frozen=True)
class Caliber:
    """The settings of a job that the oracle needs, read from its resolved config."""

    lr: float
    schedule: str
    warmup_steps: int
    max_steps: int
    min_lr_ratio: float
    batch_size: int
    grad_accum: int
    grad_clip: float | None
    val_every: int
    world_size: int
    seed: int
    n_train: int
    weight_decay: float
    momentum: float
    precision: str

    @classmethod
    def of(cls, config: dict[str, Any]) -> "Caliber":
        train = config["train"]
        return cls(float(train["lr"]), train["schedule"], int(train["warmup_steps"]), int(train["max_steps"]),
                   float(train["min_lr_ratio"]), int(train["batch_size"]), int(train["grad_accum"]),
                   None if train.get("grad_clip") is None else float(train["grad_clip"]), int(train["val_every"]),
                   int(config.get("distributed", {}).get("world_size", 1)), int(config["seed"]),
                   task_size(config), float(train.get("weight_decay") or 0.0),
                   float(train.get("momentum") or 0.0), str(config.get("precision", {}).get("name", "fp32")))

    def factor(self, warmup: int | None = None, total: int | None = None) -> "Schedule":
        return Schedule(self.schedule, self.warmup_steps if warmup is None else warmup,
                        self.max_steps if total is None else total, self.min_lr_ratio)

    def lr_at(self, completed: int, warmup: int | None = None, total: int | None = None) -> float:
        """The LR after `completed` scheduler steps (negative counts: before the first, factor 0)."""
        return self.lr * self.factor(warmup, total)(completed) if completed >= -1 else 0.0

    def sampler(self, rank: int, seed: int | None = None) -> OrderedSampler:
        return OrderedSampler(self.n_train, self.batch_size, self.seed if seed is None else seed, rank,
                              self.world_size)

    @property
    def batches_per_epoch(self) -> int:
        return self.n_train // (self.batch_size * self.world_size)


def task_size(config: dict[str, Any]) -> int:
    """The training samples of the config's task: its `n_train` argument (of `task.extra` under task=third_party),
    else the length of the training set its builder returns."""
    task = config["task"]
    for node in (task, task.get("extra") or {}):
        if "n_train" in node:
            return int(node["n_train"])
    return len(build_task(config).train_set)


def build_task(config: dict[str, Any]):
    """The config's task, built as the worker builds it, without touching torch's global RNG."""
    from hydra.utils import get_method

    task_cfg = OmegaConf.create(config["task"])
    with torch.random.fork_rng():     # the builder seeds torch itself (the model's initial weights)
        return get_method(task_cfg._target_)(int(config["seed"]), **builder_arguments(task_cfg))


def expected_lr(cal: Caliber, step: int) -> float:
    return cal.lr_at(step - 1)


def expected_val_steps(cal: Caliber) -> list[int]:
    every = set(range(cal.val_every, cal.max_steps + 1, cal.val_every)) if cal.val_every > 0 else set()
    return sorted(every | {cal.max_steps})


@dataclass
class Window:
    """One optimizer step's expected micro-batches: ids[rank] = the micro-batches' sample ids."""

    step: int
    epoch: int
    ids: dict[int, list[list[int]]]

    @property
    def size(self) -> int:
        return len(self.ids[0])


def epoch_micro_batches(cal: Caliber, epoch: int, rank: int, seed: int | None = None) -> list[list[int]]:
    flat = cal.sampler(rank, seed).rank_indices(epoch).tolist()
    return [flat[i:i + cal.batch_size] for i in range(0, len(flat), cal.batch_size)]


def expected_windows(cal: Caliber, layout: str = "evalkit", seed: int | None = None) -> list[Window]:
    """The windows of steps 1..max_steps. `layout`: "evalkit" (a short window at each epoch's end), "dropped"
    (the short window never stepped) or "carried" (micro-batches cut into windows across epoch ends). Fewer than
    max_steps windows when none is ever complete ("dropped" with epochs shorter than a window)."""
    windows: list[Window] = []
    epoch, carry = 0, {r: [] for r in range(cal.world_size)}
    while len(windows) < cal.max_steps and epoch <= cal.max_steps * cal.grad_accum:   # "dropped" may never step
        batches = {r: carry[r] + epoch_micro_batches(cal, epoch, r, seed) for r in range(cal.world_size)}
        start_epoch = epoch - 1 if carry[0] else epoch
        count = len(batches[0])
        for lo in range(0, count, cal.grad_accum):
            size = min(cal.grad_accum, count - lo)
            if size < cal.grad_accum and layout in ("dropped", "carried"):
                carry = {r: batches[r][lo:] if layout == "carried" else [] for r in batches}
                break
            windows.append(Window(len(windows) + 1, start_epoch if lo == 0 else epoch,
                                  {r: batches[r][lo:lo + size] for r in batches}))
            if len(windows) == cal.max_steps:
                break
        else:
            carry = {r: [] for r in batches}
        epoch += 1
    return windows


@dataclass(frozen=True)
class Schedule:
    """The LR factor after `s` completed scheduler steps, from the definition: (s + 1) / warmup during warm-up,
    then from 1 down to min_lr_ratio over the remaining steps (linear: straight; cosine: half a cosine wave),
    reached at `total` and held after; constant: 1 after warm-up."""

    kind: str
    warmup: int
    total: int
    min_ratio: float

    def __call__(self, s: int) -> float:
        if s < self.warmup:
            return (s + 1) / self.warmup
        if self.kind == "constant":
            return 1.0
        progress = min(1.0, (s - self.warmup) / max(1, self.total - self.warmup))
        if self.kind == "linear":
            return 1.0 - progress * (1.0 - self.min_ratio)
        return self.min_ratio + (1.0 - self.min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))


# ---------------------------------------------------------------- gradients in float64
class GradientOracle:
    """The task's model in float64: each micro-batch's mean-loss gradient at given parameters. Parameters are those
    of `parameters()`, so a tied weight (one tensor under two names) is one parameter whose gradient sums both uses,
    as the optimizer sees it; a parameter the loss does not reach has a zero gradient, and a frozen one
    (requires_grad=False, `frozen`) is expected never to move (`UpdateRule.without`). BatchNorm layers normalise with
    the micro-batch's statistics (train mode); their running statistics are buffers, which no update rule moves."""

    def __init__(self, config: dict[str, Any]):
        task = build_task(config)
        self.theta0 = torch.cat([p.detach().reshape(-1) for p in task.model.parameters()]).double().numpy()
        self.model = copy.deepcopy(task.model).double().train()
        self.params = list(self.model.parameters())
        self.layout: dict[str, slice] = {}       # parameter name -> its coordinates in the flat vector
        start = 0
        for name, p in self.model.named_parameters():
            self.layout[name] = slice(start, start + p.numel())
            start += p.numel()
        self.frozen = [name for name, p in self.model.named_parameters() if not p.requires_grad]
        self.frozen_mask = np.zeros(start, dtype=bool)
        for name in self.frozen:
            self.frozen_mask[self.layout[name]] = True
        self.loss_fn = task.loss_fn
        self.loss_terms = task.loss_terms      # None: a fixed number of loss terms per sample
        x, y = task.train_set.tensors
        self.x = x.double() if x.is_floating_point() else x      # token ids stay integers
        self.y = y.double() if y.is_floating_point() else y
        self._cache: dict[tuple, np.ndarray] = {}
        self._float32: GradientOracle | None = None

    def float32(self) -> "GradientOracle":
        """The same oracle computing in float32, as the loop under test does (the same loss: a subclass's too)."""
        if self._float32 is None:
            twin = copy.copy(self)
            twin.model = copy.deepcopy(self.model).float()
            twin.params = list(twin.model.parameters())
            twin.x = self.x.float() if self.x.is_floating_point() else self.x
            twin.y = self.y.float() if self.y.is_floating_point() else self.y
            twin._cache, twin._float32 = {}, twin
            self._float32 = twin
        return self._float32

    def load(self, theta: np.ndarray) -> None:
        torch.nn.utils.vector_to_parameters(torch.as_tensor(theta, dtype=self.params[0].dtype), self.params)

    def micro_grad(self, theta: np.ndarray, ids: list[int]) -> np.ndarray:
        key = (theta.tobytes(), tuple(ids))
        if key not in self._cache:
            self.load(theta)
            self.model.zero_grad(set_to_none=True)
            index = torch.as_tensor(ids, dtype=torch.long)
            with torch.enable_grad():
                self.loss_fn(self.model(self.x[index]), self.y[index]).backward()
            self._cache[key] = torch.cat([(torch.zeros_like(p) if p.grad is None else p.grad).reshape(-1)
                                          for p in self.params]).double().numpy().copy()
        return self._cache[key]

    def terms(self, ids: list[int]) -> int | None:
        """The loss terms of the micro-batch of samples `ids` (its target tokens); None on a task with a fixed
        number per sample."""
        if self.loss_terms is None:
            return None
        return int(self.loss_terms(self.y[torch.as_tensor(ids, dtype=torch.long)]))


def clip(g: np.ndarray, norm: float | None) -> np.ndarray:
    """torch.nn.utils.clip_grad_norm_'s rule, in float64."""
    if norm is None:
        return g
    return g * min(1.0, norm / (float(np.linalg.norm(g)) + 1e-6))


@dataclass
class ObservedStep:
    """One optimizer step as the records show it, with the oracle's gradients of the micro-batches seen."""

    step: int
    lr: float
    theta_prev: np.ndarray
    theta: np.ndarray
    grads: dict[int, list[np.ndarray]]        # rank -> each seen micro-batch's mean-loss gradient
    loss_scale: float | None = None
    row: dict[str, Any] = field(default_factory=dict)
    counts: dict[int, list[int]] | None = None    # rank -> each micro-batch's loss terms (token tasks; else None)
    rounding: float = 0.0     # |g_k in float64 - g_k in float32| / |g_k|: what float32 arithmetic alone moves g_k by

    @property
    def lrs(self) -> list[float]:
        """Each param group's LR (the step record's `lr_groups` when the optimizer has several groups)."""
        groups = self.row.get("lr_groups")
        return [float(v) for v in str(groups).split()] if groups not in (None, "") else [self.lr]

    @property
    def delta(self) -> np.ndarray:
        return self.theta - self.theta_prev

    @property
    def window_grad(self) -> np.ndarray:
        """g_k: the mean over ranks of the mean over the window's micro-batches; on a token task, the token mean
        over the whole window (every rank's micro-batches weighted by their tokens)."""
        if self.counts is not None:
            total = sum(sum(c) for c in self.counts.values())
            return sum(n * g for r, gs in self.grads.items() for n, g in zip(self.counts[r], gs)) / max(total, 1)
        return np.mean([np.mean(gs, axis=0) for gs in self.grads.values()], axis=0)

    def allowance(self, predicted: np.ndarray) -> float:
        """UPDATE_REL_TOL of the prediction, ULP_FACTOR ulps of the stored parameters, and the share of the
        prediction that float32 arithmetic alone moves the window gradient by at this step (`rounding`)."""
        ulp = np.spacing(np.abs(self.theta).astype(np.float32)).astype(np.float64)
        return ((UPDATE_REL_TOL + self.rounding) * float(np.linalg.norm(predicted))
                + ULP_FACTOR * float(np.linalg.norm(ulp)))

    def matches(self, predicted: np.ndarray) -> bool:
        return float(np.linalg.norm(self.delta - predicted)) <= self.allowance(predicted)


ROUNDING_LEVEL = 1e-6     # a parameter's largest gradient coordinate over the largest of all: below it, rounding noise


def rounding_level(steps: list[ObservedStep], layout: dict[str, slice]) -> tuple[np.ndarray, list[str]]:
    """The coordinates whose float64 window gradient is at most ROUNDING_LEVEL times the largest coordinate of the
    whole gradient at every step (the float32 run's gradient there is its rounding noise), and the parameters that
    hold them, named ("name" when all of it, else "name (k of n coordinates)"). Measured: 1e-17 against 1e-2 for a
    bias right before BatchNorm, whose gradient the normalization cancels exactly; the key third of GPT-2's
    attention bias (c_attn.bias: a constant added to every key's score, which the softmax cancels)."""
    grads = [np.abs(s.window_grad) for s in steps]
    mask = np.logical_and.reduce([g <= ROUNDING_LEVEL * np.max(g, initial=0.0) for g in grads])
    return mask, rounding_level_names(mask, layout)


def rounding_level_names(mask: np.ndarray, layout: dict[str, slice]) -> list[str]:
    """The parameters holding coordinates of `mask`: "name" when all of it, else "name (k of n coordinates)"."""
    names = []
    for name, where in layout.items():
        held, size = int(mask[where].sum()), where.stop - where.start
        if held:
            names.append(name if held == size else f"{name} ({held} of {size} coordinates)")
    return names


def float32_rounding(step: ObservedStep, oracle: GradientOracle, ids: dict[int, list[list[int]]]) -> float:
    """|g_k - g_k in float32| / |g_k| at the step's parameters and samples: about 1e-6 where the model is smooth
    there, more where a float32 forward puts an activation on the other side of a kink than float64 does (ReLU,
    max-pool, |x|: measured 6e-3 at one step of 12 on resnet18, where the loop's update was 0.6 % off the float64
    oracle's and equal to a float32 replay's). The loop under test computes in float32, so its update cannot be
    held closer to the oracle's than that (`ObservedStep.allowance`)."""
    twin = oracle.float32()
    g32 = dataclasses.replace(step, grads={r: [twin.micro_grad(step.theta_prev, b) for b in micro]
                                           for r, micro in ids.items()}).window_grad
    g64 = step.window_grad
    return float(np.linalg.norm(g64 - g32)) / max(float(np.linalg.norm(g64)), 1e-300)


def observed_micro_ids(job: JobEvidence, step: int) -> dict[int, list[list[int]]]:
    return {rank: [list(m["ids"]) for m in rows if m.get("step") == step and not m.get("skipped")]
            for rank, rows in sorted(job.micro.items())}


def attributed(micro: list[list[int]]) -> bool:
    """Every micro-batch's samples known: ids recorded (observe.sample_ids) and none unattributed (-1)."""
    return all(batch and all(i >= 0 for i in batch) for batch in micro)


def observed_steps(job: JobEvidence, oracle: GradientOracle, notes: list[str] | None = None,
                   keep: str = "all", missing: dict[str, list[int]] | None = None) -> list[ObservedStep]:
    """The steps whose parameters before and after, LR and micro-batches (all attributed to sample ids) are
    recorded. `keep`: "all" micro-batches of a step, or only the expected window's size of them ("first" or "last":
    a wrapper ran forwards no window accounts for). `missing` (when given) gets, per kind of record ("parameters",
    "LR", "sample ids"), the steps left unchecked for the lack of it."""
    notes = notes if notes is not None else []
    missing = missing if missing is not None else {}
    sizes = {w.step: w.size for w in expected_windows(Caliber.of(job.config))} if keep != "all" else {}
    params = {0: oracle.theta0, **job.params}
    rows = {int(r["step"]): r for r in job.steps}
    out, skipped = [], []
    for step in sorted(rows):
        ids = observed_micro_ids(job, step)
        if step in sizes:
            n = sizes[step]
            ids = {r: (micro[:n] if keep == "first" else micro[-n:]) for r, micro in ids.items()}
        lacks = [kind for kind, lacking in (
            ("parameters", step - 1 not in params or step not in params),
            ("LR", rows[step].get("lr") is None),
            ("sample ids", not ids or not all(ids.values()) or not all(map(attributed, ids.values())))) if lacking]
        if lacks:
            skipped.append(step)
            for kind in lacks:
                missing.setdefault(kind, []).append(step)
            continue
        theta_prev = np.asarray(params[step - 1], dtype=np.float64)
        grads = {r: [oracle.micro_grad(theta_prev, batch) for batch in micro] for r, micro in ids.items()}
        counts = {r: [oracle.terms(batch) for batch in micro] for r, micro in ids.items()} \
            if oracle.loss_terms is not None else None
        seen = ObservedStep(step, float(rows[step]["lr"]), theta_prev, np.asarray(params[step], np.float64),
                            grads, rows[step].get("loss_scale"), rows[step], counts)
        seen.rounding = float32_rounding(seen, oracle, ids)
        out.append(seen)
    if skipped:
        lacking = "; ".join(f"{kind} not recorded at {len(steps)} step(s)" for kind, steps in missing.items())
        notes.append(f"{job.name}: update not checked at steps {skipped} ({lacking})")
    return out


def expected_update(step: ObservedStep, clip_norm: float | None) -> np.ndarray:
    return -step.lr * clip(step.window_grad, clip_norm)


def clip_norm_for(job: JobEvidence, seed: int | None = None) -> float | None:
    """The clip norm for the clip job planned after `job` (the job without clipping): the lowest decile
    (CLIP_QUANTILE) of each window's largest partial sum along the oracle's own run of `job`'s caliber at the clip
    job's seed (`seed`; default `job`'s seed + 1, the plan's): evalkit's windows and LR, unclipped updates, in float64.
    A partial sum is the accumulated (loss-divided) gradient after the k-th of a window's n micro-batches, k < n: at
    this norm, a loop that clips what has accumulated after every micro-batch, instead of once per window, clips
    before its window is complete and its update differs. Measured along the oracle's clipped run (seeds 1 to 6):
    partial sums exceed the norm in 5 to 7 of the 8 windows of two or more micro-batches at world size 1 and 8 to
    10 of 10 at world size 2, and whole windows are clipped on 8 to 10 of 10 steps. The rule before (the lowest
    decile of the window norms) left partial sums above the norm in 2 of 10 windows at seed 1, the lower quartile
    (before the rule) clipped 1 of 10 steps. None when `job` has no config (it never started): the plan then does
    not run the clip job and the judge says so."""
    if not job.config:
        return None
    config = {**job.config, "seed": int(job.config["seed"]) + 1 if seed is None else int(seed)}
    partial = [n.largest_partial for n in oracle_run_norms(config) if n.largest_partial is not None]
    return float(np.percentile(partial, CLIP_QUANTILE))


@dataclass(frozen=True)
class WindowNorms:
    """A window's gradient norm |g_k| and its largest partial sum's (None for a window of one micro-batch)."""

    window: float
    largest_partial: float | None


def oracle_run_norms(config: dict[str, Any]) -> list[WindowNorms]:
    """The norms of steps 1..max_steps along the oracle's own unclipped run of `config` (evalkit's windows, expected
    LR, from the task's initial weights). g_k is the mean over ranks of the mean of the window's micro-batch
    gradients; its partial sums divide by grad_accum as a loop that divides each micro-batch's loss does."""
    cal = Caliber.of(config)
    oracle = GradientOracle(config)
    theta, norms = oracle.theta0, []
    for window in expected_windows(cal):
        micro = [[oracle.micro_grad(theta, batch) for batch in window.ids[r]] for r in sorted(window.ids)]
        g = np.mean([np.mean(rank, axis=0) for rank in micro], axis=0)
        partial = [float(np.linalg.norm(np.mean([np.sum(rank[:k], axis=0) for rank in micro], axis=0)))
                   / cal.grad_accum for k in range(1, window.size)]
        norms.append(WindowNorms(float(np.linalg.norm(g)), max(partial) if partial else None))
        theta = theta - expected_lr(cal, window.step) * g
    return norms
