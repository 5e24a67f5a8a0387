"""Structured-config schemas, registered in Hydra's ConfigStore.

The primary config (`conf/config.yaml`) puts `evalkit_schema` first in its defaults list, so every
group file and command-line override is merged into these dataclasses: an unknown key or a value of
the wrong type fails at compose time with Hydra's own message.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING


@dataclass
class TrainerConfig:
    _target_: str = MISSING          # import path of the adapter class
    name: str = MISSING
    mode: str = "aligned"            # aligned | defaults
    extra: str = ""                  # the pip extra that installs the wrapper ("" for the baseline)
    requires: list[str] = field(default_factory=list)  # modules that must be importable
    options: dict[str, Any] = field(default_factory=dict)  # wrapper-specific knobs


@dataclass
class TaskConfig:
    _target_: str = MISSING          # import path of the task builder function
    name: str = MISSING
    n_train: int = 1024
    n_val: int = 256
    in_dim: int = 16
    hidden: int = 64
    depth: int = 2
    out_dim: int = 1
    image_size: int = 16
    channels: int = 3
    vocab_size: int = 64
    seq_len: int = 32
    n_heads: int = 2
    noise: float = 0.1
    metric_margin: float = 0.01      # equivalence margin for the validation metric (relative)
    extra: dict[str, Any] = field(default_factory=dict)  # passed to third-party task builders


@dataclass
class HardwareConfig:
    name: str = "cpu"
    device: str = "cpu"              # cpu | cuda | auto (cuda when available)
    threads: int = 0                 # torch intra-op threads per worker; 0 = torch's default


@dataclass
class PrecisionConfig:
    name: str = "fp32"               # fp32 | bf16_mixed | fp16_mixed
    autocast_dtype: Optional[str] = None   # bfloat16 | float16 | None
    grad_scaler: bool = False


@dataclass
class DistributedConfig:
    name: str = "none"               # none | ddp
    world_size: int = 1
    backend: str = "auto"            # auto (gloo on cpu, nccl on cuda) | gloo | nccl
    master_addr: str = "127.0.0.1"
    timeout_s: int = 300


@dataclass
class TrackingConfig:
    uri: Optional[str] = None        # default: sqlite:///<launch dir>/mlflow.db; MLFLOW_TRACKING_URI wins
    experiment: str = "evalkit"
    flush_interval_s: float = 1.0
    batch_size: int = 1000           # metric points per log_batch call (MLflow caps at 1000)
    progress_interval_s: float = 5.0


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


@dataclass
class ObserveConfig:
    sample_ids: bool = True          # recover dataset indices of every micro-batch
    params: bool = False             # store all parameters after every optimizer step (tiny models)
    warmup_steps: int = 5            # steps excluded from throughput and memory windows


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
    seed: int = 0
    repeat: int = 0                  # repeat index: same seed, run again (noise of the machine)
    resume_from: Optional[str] = None  # checkpoint path (or directory: its latest) to resume from
    run_name: Optional[str] = None


def register_configs() -> None:
    cs = ConfigStore.instance()
    cs.store(name="evalkit_schema", node=EvalkitConfig)
