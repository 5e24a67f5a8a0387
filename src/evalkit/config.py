"""Structured-config schemas, registered in Hydra's ConfigStore.

The primary config (`conf/config.yaml`) puts `evalkit_schema` first in its defaults list, so every
group file and command-line override is merged into these dataclasses: an unknown key or a value of
the wrong type fails at compose time with Hydra's own message. A task's and a probe's settings follow
their own schema, which their YAML names (a probe's is in its package: evalkit.probes.catalog). What the
types cannot say (a key added with `+`, a value outside its range or its choices) `validate` reports before
anything is recorded; `config_warnings` names valid settings that quietly lose a measurement.
"""
from __future__ import annotations

import dataclasses
import difflib
import functools
import math
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from evalkit import launchers
from evalkit.contract.options import option_problems
from evalkit.probes.catalog import probe_names, probe_with, probe_yamls, stored_schemas
from evalkit.tasks.schemas import BUNDLED, TaskConfig, ThirdPartyTask, fit_problems


@dataclass
class LaunchConfig:
    """How the wrapper's documentation starts its processes (`evalkit.launchers`): its launcher at one rank, at
    several, and at several on CUDA (null: `many`); `source`: the page that says so."""

    one: str = "python"
    many: str = "torchrun"
    many_cuda: Optional[str] = None
    source: str = ""


@dataclass
class TrainerConfig:
    _target_: str = MISSING          # import path of the adapter class
    name: str = MISSING
    mode: str = "aligned"            # aligned | defaults
    options: dict[str, Any] = field(default_factory=dict)  # wrapper-specific knobs
    # What the wrapper needs, written once (evalkit.trainers): pip requirements, pinned, the wrapper's own first
    # (versions recorded; none for the baseline), and the modules the adapter imports (checked, preloaded, timed)
    requirements: list[str] = field(default_factory=list)
    modules: list[str] = field(default_factory=list)
    # the wrapper's own documentation, as host[/path] prefixes (`lightning.ai/docs/pytorch`): the only pages an
    # UnsupportedCombination of kind documented-unsupported may cite (`evalkit.trainers.docs_page`); a refusal citing
    # anything else is judged as an undocumented one (evalkit.probes.refusals)
    docs: list[str] = field(default_factory=list)
    # probe=customization: the adapter classes adding a custom loss ("loss") and a custom callback ("callback")
    customizations: dict[str, str] = field(default_factory=dict)
    launch: LaunchConfig = field(default_factory=LaunchConfig)
    # the wrapper's documented evaluation scores each sample once where a distributed sampler repeats some to even out
    # the ranks (Accelerate's gather_for_metrics): evalkit's validation metric then does too
    val_dedup: bool = False
    # the environment (`evalkit-env create <requirement>`) whose interpreter runs the workers: the wrapper at the
    # version it pins; null: evalkit's own interpreter
    env: Optional[str] = None


@dataclass
class HardwareConfig:
    name: str = "cpu"
    device: str = "cpu"              # cpu | cuda | auto (cuda when available)
    threads: int = 0                 # torch intra-op threads per worker; 0 = torch's default
    # how a job's workers start: auto (forked from a warm server that has imported torch and the wrapper, where that
    # keeps the job's meaning: controller/launch/warm_server.py), fresh (a new interpreter each), warm (forked, or an
    # error)
    worker_start: str = "auto"


@dataclass
class PrecisionConfig:
    name: str = "fp32"               # fp32 | bf16_mixed | fp16_mixed
    autocast_dtype: Optional[str] = None   # bfloat16 | float16 | None
    grad_scaler: bool = False


@dataclass
class DistributedConfig:
    """The process group's backend and timeout are each adapter's (gloo on CPU, NCCL on CUDA, the wrapper's
    default timeout): a wrapper chooses its own, so a setting here could not reach every arm alike."""

    name: str = "none"               # none | ddp
    world_size: int = 1              # every rank of the job, over all its nodes (a multiple of nnodes)
    master_addr: str = "127.0.0.1"   # where rank 0 listens: with nnodes > 1, node 0's address every node reaches
    init_by: str = "adapter"         # adapter | evalkit (the worker creates the process group before fit)
    # Several nodes: run `evalkit` on each with the same settings but node_rank (0 .. nnodes-1); each starts
    # world_size/nnodes ranks (RANK = node_rank * world_size/nnodes + LOCAL_RANK, as torchrun does). Node 0 records
    # the MLflow run; the others record nothing, wait for their ranks and report them (stderr, exit code) to node 0.
    # The nodes meet in shared_dir, a folder on a filesystem every node sees under the same path (NFS, Lustre...):
    # the job's directory (spool, records, checkpoints, logs) instead of Hydra's run directory.
    nnodes: int = 1
    node_rank: int = 0
    master_port: Optional[int] = None   # rank 0's port; null = a free one (one node only: every node must agree)
    shared_dir: Optional[str] = None    # required with nnodes > 1 (see above); one folder per job
    # Under `srun --nodes=N --ntasks-per-node=1 evalkit ...` nnodes, node_rank, master_addr and master_port come from
    # SLURM's variables, and shared_dir is <shared_root>/slurm-<job id>.<step id> (controller/job/srun.py)
    shared_root: Optional[str] = None
    node_timeout_s: float = 300.0    # how long a node waits for the others to start, and node 0 for their reports


@dataclass
class TrackingConfig:
    uri: Optional[str] = None        # wins over MLFLOW_TRACKING_URI; neither: sqlite:///<launch dir>/mlflow.db
    experiment: str = "evalkit"
    flush_interval_s: float = 1.0
    batch_size: int = 1000           # metric points per log_batch call (MLflow caps at 1000)
    progress_interval_s: float = 5.0          # how often a plain progress line is printed
    progress: str = "auto"                   # auto | live (one line rewritten in place) | plain (lines) | quiet
    system_metrics_interval_s: float = 2.0   # MLflow's system/* metrics, sampled by the controller; 0 = off


@dataclass
class TrainConfig:
    optimizer: str = "adamw"         # adamw | adam | sgd
    lr: float = 1e-3
    weight_decay: float = 0.0
    momentum: float = 0.9
    betas: list[float] = field(default_factory=lambda: [0.9, 0.999])
    schedule: str = "cosine"         # constant | linear | cosine
    warmup_steps: int = 5            # LR warm-up, in optimizer steps
    min_lr_ratio: float = 0.0
    batch_size: int = 32             # per device
    grad_accum: int = 1
    grad_clip: Optional[float] = 1.0  # max global grad norm; null = no clipping
    max_steps: int = 100             # optimizer steps
    val_every: int = 25              # optimizer steps; 0 = only at the end
    ckpt_every: int = 0              # optimizer steps; 0 = only at the end
    num_workers: int = 0             # DataLoader workers
    compile: bool = False            # torch.compile the model the way the trainer's documentation does it
    # the mode the model is handed to the wrapper in: train, or eval (as from_pretrained returns a model): training
    # forwards must then run in train mode all the same (the wrapper, or the quick start's code, switches it)
    model_mode: str = "train"
    # wall seconds the job may run before evalkit stops it and fails it (null: no limit): a wrapper that never reaches
    # max_steps would otherwise run on forever (the semantic probe sets it for its jobs)
    time_limit_s: Optional[float] = None


@dataclass
class ObserveConfig:
    sample_ids: bool = True          # recover dataset indices of every micro-batch
    params: bool = False             # store all parameters after every optimizer step (tiny models)
    warmup_steps: int = 5            # steps excluded from throughput and memory windows
    profile: str = "full"            # full | timing (only step clocks, sample counts, memory: timed probe jobs)
    memory_every: int = 0            # full profile: sample RSS (and CUDA memory) every this many steps; 0 = off
    deprecations: bool = False       # record every deprecation/future warning raised, with the module raising it
    call_profile: int = 0            # profile this many steps after the warm-up (cProfile, tracemalloc); 0 = off


@dataclass
class FaultsConfig:
    """Faults the worker injects into its own process (the stability and functional probes); 0 = off. Steps
    count optimizer steps of this job."""

    kill_after_step: int = 0         # SIGKILL at the first training forward after this step (after its checkpoint)
    kill_in_save_after_step: int = 0  # SIGKILL halfway through the first torch.save after this step
    oom_at_step: int = 0             # torch.OutOfMemoryError raised in the model's forward during this step
    loss_error_at_step: int = 0      # an exception raised in the loss function during this step
    disk_full_at_step: int = 0       # the spool's device full from this step on (its write fails with ENOSPC)
    slow_forward_s: float = 0.0      # a sleep in every training forward: a slow job (an outage while it trains)


@dataclass
class SweepConfig:
    # Re-running a sweep with resume=true skips every job whose resolved config (tracking settings aside) at the same
    # versions (its fingerprint: controller/job/fingerprint.py) already has a FINISHED run in the store; FAILED and
    # KILLED ones run again, and a FINISHED one of other versions (a wrapper, torch, evalkit or its judges upgraded).
    resume: bool = False


@dataclass
class ProbeConfig:
    """`probe=<name>` runs a probe (its jobs are child runs of one probe run) instead of one plain job. A probe's
    settings are its own: its conf/probe YAML names their schema, a subclass of this one in the probe's package
    (evalkit.probes.catalog), whose `ranges` and `problems` `validate` applies; `probe=none` has no setting."""

    _target_: Optional[str] = None   # the probe's class (none: no probe)
    name: str = "none"               # the `probe=<name>` choice

    @staticmethod
    def ranges() -> dict[str, Range]:
        """The range of each numeric setting, by its key under `probe.`."""
        return {}

    @staticmethod
    def problems(probe: DictConfig) -> list[str]:
        """What the types and ranges cannot say (a list that must not be empty, a value outside its choices), one
        line each, with the fix."""
        return []


PROBE_COMMON = tuple(f.name for f in dataclasses.fields(ProbeConfig))   # every probe's; the others are its own


@dataclass
class EvalkitConfig:
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    task: TaskConfig = field(default_factory=TaskConfig)
    hardware: HardwareConfig = field(default_factory=HardwareConfig)
    precision: PrecisionConfig = field(default_factory=PrecisionConfig)
    distributed: DistributedConfig = field(default_factory=DistributedConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    observe: ObserveConfig = field(default_factory=ObserveConfig)
    probe: ProbeConfig = field(default_factory=ProbeConfig)
    sweep: SweepConfig = field(default_factory=SweepConfig)
    faults: FaultsConfig = field(default_factory=FaultsConfig)
    seed: int = 0
    repeat: int = 0                  # repeat index: same seed, run again (noise of the machine)
    resume_from: Optional[str] = None  # checkpoint path (or directory: its latest) to resume from
    run_name: Optional[str] = None


def register_configs() -> None:
    """The schema, and the `${evalkit_uid:}` resolver of the default run directories (conf/config.yaml)."""
    from omegaconf import OmegaConf

    from evalkit.controller.job.rundir import process_uid

    if not OmegaConf.has_resolver("evalkit_uid"):
        # Cached: a sweep's configs carry the value of the process that started it (Hydra copies the resolver
        # cache into each job's config), so jobs run in other processes (joblib, submitit) share its sweep dir.
        OmegaConf.register_new_resolver("evalkit_uid", process_uid, use_cache=True)
    cs = ConfigStore.instance()
    cs.store(name="evalkit_schema", node=EvalkitConfig)
    for name, schema in BUNDLED.items():      # named by each conf/task/<name>.yaml's defaults list
        cs.store(name=f"{name}_schema", node=schema)
    cs.store(group="task", name="third_party", node=ThirdPartyTask)   # `task=third_party task._target_=...`
    for path, schema in stored_schemas().items():   # named by each conf/probe/<name>.yaml's defaults list
        cs.store(name=path, node=schema)


# ------------------------------------------------------------------ what the types cannot say
SEED_LIMIT = 2**32   # numpy's seeding (and the transformers Trainer's set_seed) accepts seeds below 2**32 only


@dataclass(frozen=True)
class Range:
    """The values a numeric setting allows (finite numbers only); each bound is inclusive unless marked open."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    nullable: bool = False          # null is allowed too (train.grad_clip: no clipping)
    length: int | None = None       # a list of exactly this many numbers, each in the range
    items: bool = False             # a non-empty list of any length, each number in the range

    def allows(self, value: Any) -> bool:
        if self.length is not None or self.items:
            return (isinstance(value, (list, ListConfig)) and len(value) == (self.length or len(value) or -1)
                    and all(self._holds(v) for v in value))
        return self.nullable if value is None else self._holds(value)

    def _holds(self, v: Any) -> bool:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            return False
        above = self.low is None or v > self.low or (v == self.low and not self.low_open)
        below = self.high is None or v < self.high or (v == self.high and not self.high_open)
        return above and below

    def __str__(self) -> str:
        if self.low is not None and self.high is not None:
            text = (f"in {'(' if self.low_open else '['}{_number(self.low)}, "
                    f"{_number(self.high)}{')' if self.high_open else ']'}")
        else:
            text = f"{'>' if self.low_open else '>='} {_number(self.low)}"
        if self.length is not None:
            text = f"{self.length} values, each {text}"
        elif self.items:
            text = f"one or more values, each {text}"
        return f"null or {text}" if self.nullable else text


POSITIVE, AT_LEAST_0, AT_LEAST_1 = Range(0, low_open=True), Range(0), Range(1)
UNIT_OPEN = Range(0, 1, high_open=True)
# of the bundled tasks; a key the job's task lacks is not checked
TASK_SIZES = ("n_train", "n_val", "in_dim", "hidden", "depth", "out_dim", "image_size", "channels", "vocab_size",
              "seq_len", "n_heads", "width", "classes")
RANGES: dict[str, Range] = {
    "train.lr": POSITIVE, "train.weight_decay": AT_LEAST_0, "train.momentum": UNIT_OPEN,
    "train.betas": Range(0, 1, high_open=True, length=2), "train.warmup_steps": AT_LEAST_0,
    "train.min_lr_ratio": Range(0, 1), "train.batch_size": AT_LEAST_1, "train.grad_accum": AT_LEAST_1,
    "train.grad_clip": Range(0, low_open=True, nullable=True), "train.max_steps": AT_LEAST_1,
    "train.time_limit_s": Range(0, low_open=True, nullable=True),
    "train.val_every": AT_LEAST_0, "train.ckpt_every": AT_LEAST_0, "train.num_workers": AT_LEAST_0,
    **{f"task.{size}": AT_LEAST_1 for size in TASK_SIZES},
    "task.noise": AT_LEAST_0, "task.dropout": Range(0, 1, high_open=True), "task.metric_margin": POSITIVE,
    "hardware.threads": AT_LEAST_0,
    "distributed.world_size": AT_LEAST_1, "distributed.nnodes": AT_LEAST_1, "distributed.node_rank": AT_LEAST_0,
    "distributed.master_port": Range(1, 65535, nullable=True), "distributed.node_timeout_s": POSITIVE,
    "tracking.flush_interval_s": POSITIVE, "tracking.batch_size": Range(1, 1000),
    "tracking.progress_interval_s": POSITIVE, "tracking.system_metrics_interval_s": AT_LEAST_0,
    "observe.warmup_steps": AT_LEAST_0, "observe.memory_every": AT_LEAST_0, "observe.call_profile": AT_LEAST_0,
    **{f"faults.{k}": AT_LEAST_0 for k in ("kill_after_step", "kill_in_save_after_step", "oom_at_step",
                                           "loss_error_at_step", "disk_full_at_step", "slow_forward_s")},
    "seed": Range(0, SEED_LIMIT, high_open=True), "repeat": Range(0, 2**63, high_open=True),
}


def choices() -> dict[str, tuple]:
    """The settings that take one of a few values, and those values."""
    from evalkit.contract.adapter_class import MODES

    return {"trainer.mode": MODES, "probe.name": ("none", *probe_names()), "train.optimizer": ("adamw", "adam", "sgd"),
            "train.schedule": ("constant", "linear", "cosine"), "train.model_mode": ("train", "eval"),
            "precision.name": ("fp32", "bf16_mixed", "fp16_mixed"),
            "precision.autocast_dtype": (None, "bfloat16", "float16"), "hardware.device": ("cpu", "cuda", "auto"),
            "hardware.worker_start": ("auto", "fresh", "warm"),
            "observe.profile": ("full", "timing"), "distributed.init_by": ("adapter", "evalkit"),
            "tracking.progress": ("auto", "live", "plain", "quiet")}


def validate(cfg: DictConfig) -> list[str]:
    """Every problem of a composed config that Hydra's types let through, one line each naming the key, the
    value, what is allowed and the fix; empty when the config is valid."""
    from evalkit.trainers import identity_problem

    identity = identity_problem(cfg.trainer) if "trainer" in cfg else None
    unknown, missing = unknown_keys(cfg), _missing_problems(cfg)
    task_fits = not missing and not any(u.startswith("task.") for u in unknown) and "task" in cfg
    return [*unknown, *missing, *_choice_problems(cfg), *_range_problems(cfg), *([identity] if identity else []),
            *(fit_problems(cfg.task) if task_fits else []), *_probe_problems(cfg), *_node_problems(cfg),
            *_launch_problems(cfg), *(option_problems(cfg.trainer) if "trainer" in cfg else [])]


def _launch_problems(cfg: DictConfig) -> list[str]:
    """The trainer's launchers: known names, and one that starts several processes where the job has several."""
    trainer, dist = cfg.get("trainer"), cfg.get("distributed")
    if trainer is None or dist is None or not isinstance(dist.get("world_size"), int):
        return []
    launch = OmegaConf.to_container(trainer.get("launch") or {}, resolve=True)
    found = launchers.problem(launch, dist.world_size)
    return [found] if found else []


def _probe_problems(cfg: DictConfig) -> list[str]:
    """The probe's own checks (its schema's `problems`), once every setting has a value."""
    probe = cfg.get("probe")
    if probe is None or OmegaConf.missing_keys(probe):
        return []
    return _schema(probe, ProbeConfig).problems(probe)


def _ranges(cfg: DictConfig) -> dict[str, Range]:
    """RANGES, and those of the probe's settings (its schema's `ranges`)."""
    probe = cfg.get("probe")
    own = _schema(probe, ProbeConfig).ranges() if probe is not None else {}
    return {**RANGES, **{f"probe.{key}": allowed for key, allowed in own.items()}}


def _node_problems(cfg: DictConfig) -> list[str]:
    """A job over several nodes: its ranks split evenly, every node agreeing on rank 0's port and on the folder
    they meet in; a probe (many jobs) runs on one node. Checked once the numbers are in their ranges."""
    dist = cfg.get("distributed")
    if dist is None or any(not RANGES[f"distributed.{k}"].allows(dist.get(k)) for k in ("world_size", "nnodes",
                                                                                          "node_rank")):
        return []
    nnodes, world, problems = dist.nnodes, dist.world_size, []
    if world % nnodes:
        problems.append(f"distributed.world_size={world} is not divisible by distributed.nnodes={nnodes}: the job's "
                        f"ranks are split evenly over its nodes; set distributed.world_size to a multiple of {nnodes} "
                        f"(e.g. distributed.world_size={world + nnodes - world % nnodes}) or change distributed.nnodes")
    if dist.node_rank >= nnodes:
        problems.append(f"distributed.node_rank={dist.node_rank} is not a node of distributed.nnodes={nnodes} "
                        f"(allowed: 0 to {nnodes - 1}): give every node its own node_rank, 0 on the node that "
                        "records the run")
    if nnodes == 1:
        return problems
    if dist.get("master_port") is None:
        problems.append(f"distributed.master_port=null with distributed.nnodes={nnodes}: every node must reach rank 0 "
                        "at the same port, so none can pick one at random; set it, the same on every node (e.g. "
                        "distributed.master_port=29500)")
    if not dist.get("shared_dir"):
        problems.append(f"distributed.shared_dir=null with distributed.nnodes={nnodes}: the nodes meet in a folder "
                        "every node sees (node 0 records the other nodes' ranks from it); set it to a folder on a "
                        "shared filesystem, the same path on every node, one per job (e.g. "
                        "distributed.shared_dir=/shared/evalkit/job-1; under srun, distributed.shared_root=/shared/"
                        "evalkit gives each step a folder of its own)")
    probe = cfg.get("probe")
    if probe is not None and probe.get("name", "none") != "none":
        problems.append(f"probe={probe.name} with distributed.nnodes={nnodes}: a probe runs its jobs on one node; "
                        "set distributed.nnodes=1")
    return problems


def unknown_keys(cfg: DictConfig) -> list[str]:
    """Keys the schema does not have (added with `+`, which Hydra accepts), each with the closest valid key."""
    return list(_unknown_keys(cfg, EvalkitConfig, ""))


def _schema(node: Any, declared: Any) -> Any:
    """The dataclass a config node follows: its own when it has one (a task's, named by its YAML), else the
    declared type."""
    own = OmegaConf.get_type(node) if isinstance(node, DictConfig) else None
    return own if dataclasses.is_dataclass(own) else declared


def _unknown_keys(node: DictConfig, schema: type, prefix: str) -> Iterator[str]:
    types = typing.get_type_hints(schema)
    for key in node:
        if key not in types:
            yield (not_a_probe_setting(f"{prefix}{key}", node) if prefix == "probe."
                   else _unknown_key_message(f"{prefix}{key}", prefix, list(types)))
        elif (not OmegaConf.is_missing(node, key) and isinstance(node[key], DictConfig)
              and dataclasses.is_dataclass(sub := _schema(node[key], types[key]))):
            yield from _unknown_keys(node[key], sub, f"{prefix}{key}.")


def _unknown_key_message(path: str, prefix: str, known: list[str]) -> str:
    close = difflib.get_close_matches(path.rpartition(".")[2], known, n=1)
    fix = (f"did you mean {prefix}{close[0]}?" if close
           else f"remove it; {prefix.rstrip('.') or 'the top level'} has {', '.join(known)}")
    return f"{path} is not a setting (evalkit would ignore it): {fix}"


def not_a_probe_setting(path: str, probe: DictConfig) -> str:
    """`probe.<key>` that the probe's schema lacks: whose setting it is (another probe's), or the nearest of its own."""
    name, key = probe.get("name"), path.removeprefix("probe.")
    own = [k for k in typing.get_type_hints(_schema(probe, ProbeConfig)) if k not in PROBE_COMMON]
    has = f"probe={name} has {', '.join(own)}" if own else f"probe={name} has no settings"
    others = [other for other in probe_with(key) if other != name]
    if others:
        return (f"{path} is a setting of {' and '.join(f'probe={o}' for o in others)}, not of probe={name} ({has}): "
                "remove it, or run that probe")
    close = difflib.get_close_matches(key.split(".")[0], own, n=1)
    return f"{path} is not a setting of probe={name}: " + (f"did you mean probe.{close[0]}?" if close
                                                            else f"remove it ({has})")


def not_a_setting(path: str, parent: Any = None) -> str | None:
    """What to say of `path`, a key the composed config lacks, where Hydra's error names it and the node `parent`
    that lacks it: whose setting it is, or the nearest valid key; None when neither is known."""
    if path.count(".") == 1 and path.startswith("probe.") and isinstance(parent, DictConfig):
        return not_a_probe_setting(path, parent)
    own = _schema(parent, None) if path.startswith("probe.") else None   # a probe's own group of settings
    close = closest_key(path, own)
    return f"{path} is not a setting: did you mean {close}?" if close else None


def closest_key(path: str, schema: Any = None) -> str | None:
    """The schema's key nearest to `path` in the same group (`train.max_step` -> `train.max_steps`), or None.
    `schema`: that group's, when known (a probe's own); else found from EvalkitConfig, where under `task.` only the
    keys every task has are (each task's own are in its schema: `evalkit.tasks.schemas`)."""
    *groups, name = path.split(".")
    if schema is None:
        schema = EvalkitConfig
        for group in groups:
            schema = typing.get_type_hints(schema).get(group)
            if not dataclasses.is_dataclass(schema):
                return None
    close = difflib.get_close_matches(name, list(typing.get_type_hints(schema)), n=1)
    return ".".join([*groups, close[0]]) if close else None


def _missing_problems(cfg: DictConfig) -> list[str]:
    """Settings left without a value (`???`: a third-party task's `_target_` and `name`)."""
    return [f"{key} has no value: set it ({key}=...)" for key in sorted(OmegaConf.missing_keys(cfg))]


CHOSEN_BY_GROUP = {"precision.name": "precision", "hardware.device": "hardware"}   # set by a group of that name


def _choice_problems(cfg: DictConfig) -> Iterator[str]:
    for key, allowed in choices().items():
        value = _select(cfg, key)
        if value not in allowed:
            names = [_show(c) for c in allowed]
            close = difflib.get_close_matches(_show(value), names, n=1, cutoff=0.5)
            if key in CHOSEN_BY_GROUP:
                fix = f"choose with the group instead: {CHOSEN_BY_GROUP[key]}={'|'.join(names)}"
            else:
                fix = f"did you mean {key}={close[0]}?" if close else f"set {key} to one of them"
            yield f"{key}={_show(value)} is not one of {', '.join(names)}: {fix}"


def _range_problems(cfg: DictConfig) -> Iterator[str]:
    for key, allowed in _ranges(cfg).items():
        value = _select(cfg, key, absent=_ABSENT)
        if value is not _ABSENT and not allowed.allows(value):
            yield (f"{key}={_show(value)} is out of range (allowed: {allowed}): "
                   f"set it within that range{_example(cfg, key)}")


def _example(cfg: DictConfig, key: str) -> str:
    """`, e.g. key=<its default>`: the schema's default, or for a task's or a probe's key the value its bundled YAML
    gives it."""
    value = _select(_defaults(), key, absent=_ABSENT)
    if value is _ABSENT and key.startswith("task.") and "task" in cfg:
        name = next((n for n, s in BUNDLED.items() if s is OmegaConf.get_type(cfg.task)), None)
        value = _select(bundled_task(name), key.removeprefix("task."), absent=_ABSENT) if name else _ABSENT
    if value is _ABSENT and key.startswith("probe.") and "probe" in cfg:
        written = probe_yamls().get(cfg.probe.get("name"))
        value = _select(written, key.removeprefix("probe."), absent=_ABSENT) if written is not None else _ABSENT
    return "" if value is _ABSENT else f", e.g. {key}={_show(value)}"


@functools.cache
def bundled_task(name: str) -> DictConfig:
    """A bundled task's YAML as written (conf/task/<name>.yaml, its defaults list included)."""
    return OmegaConf.load(Path(__file__).parent / "conf" / "task" / f"{name}.yaml")


def config_warnings(cfg: DictConfig) -> list[str]:
    """Valid settings that quietly lose a measurement, one line each saying what is lost and the fix."""
    warnings = []
    warmup, steps = cfg.observe.warmup_steps, cfg.train.max_steps
    if warmup >= steps:
        warnings.append(f"observe.warmup_steps={warmup} >= train.max_steps={steps}: every step is a warm-up step, "
                        "so this run records no throughput (perf/samples_per_s, perf/steps_per_s, "
                        f"perf/step_time_median_s); set observe.warmup_steps below {steps} (e.g. "
                        "observe.warmup_steps=0) or raise train.max_steps")
    lr_warmup = cfg.train.warmup_steps
    if lr_warmup > steps:
        warnings.append(f"train.warmup_steps={lr_warmup} > train.max_steps={steps}: the learning rate never reaches "
                        f"train.lr={cfg.train.lr} (its last step runs at {steps / lr_warmup:.0%} of it); set "
                        f"train.warmup_steps to at most {steps} or raise train.max_steps")
    return warnings


@functools.cache
def _defaults() -> DictConfig:
    return OmegaConf.structured(EvalkitConfig)


_ABSENT = object()


def _select(cfg: DictConfig, key: str, absent: Any = None) -> Any:
    """The value at `key`; `absent` when the config has no such key or leaves it without a value."""
    try:
        return OmegaConf.select(cfg, key, default=absent)
    except OmegaConfBaseException as exc:   # an interpolation that does not resolve
        return f"<unresolvable: {str(exc).splitlines()[0]}>"


def _show(value: Any) -> str:
    """A value as it is written on the command line."""
    if value is None:
        return "null"
    if isinstance(value, (list, ListConfig)):
        return f"[{','.join(_show(v) for v in value)}]"
    return str(value)


def _number(x: float) -> str:
    return f"2**{x.bit_length() - 1}" if isinstance(x, int) and x >= 2**16 and x & (x - 1) == 0 else str(x)
