"""The consistency probe's plan: one caliber, and per switch `probe.seeds` seeds of the wrapper and the baseline.

The caliber is a small MLP regression (561 parameters) trained 80 steps of SGD with momentum, warm-up, cosine
decay and clipping, validated once at the end: fast on a CPU, mostly start-up. SGD, not Adam: Adam's update is
blind to the gradient's scale, so a wrong loss or gradient scaling (accumulation, loss scaling, DDP averaging)
would leave Adam's results unchanged and this probe blind to it. Stage 1 and 2 run it in fp32 in one process;
each switch of `probe.switches` changes one thing (mixed precision, or DDP at world size 2), for both arms alike.
The first seed's jobs record their parameters after every step, so stage 1 sees an update differ at step 1.
Jobs are named `<switch>-s<seed>-<arm>` (switch `fp32` for stages 1 and 2; arm `wrapper` or `baseline`).
"""
from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from omegaconf import OmegaConf

TASK = "mlp_regression"
REFERENCE = "fp32"                # stages 1 and 2: fp32, one process
WRAPPER, BASELINE = "wrapper", "baseline"
CALIBER: dict[str, object] = {
    "task.n_train": 512, "task.n_val": 256, "task.in_dim": 16, "task.hidden": 16, "task.depth": 2,
    "task.out_dim": 1, "task.noise": 0.1,
    "train.optimizer": "sgd", "train.lr": 0.05, "train.momentum": 0.9, "train.weight_decay": 0.0,
    "train.schedule": "cosine", "train.warmup_steps": 5, "train.min_lr_ratio": 0.1,
    "train.batch_size": 16, "train.grad_accum": 1, "train.grad_clip": 1.0, "train.max_steps": 80,
    "train.val_every": 0, "train.ckpt_every": 0, "train.num_workers": 0,
    "observe.sample_ids": True, "observe.warmup_steps": 0,
}
ONE_PROCESS = {"distributed.name": "none", "distributed.world_size": 1}
DDP2 = {"distributed.name": "ddp", "distributed.world_size": 2}
PRECISION_DIR = Path(__file__).resolve().parents[2] / "conf" / "precision"


class JobKey(NamedTuple):
    switch: str     # fp32 (the reference) or one of settings.SWITCHES
    seed: int
    arm: str        # WRAPPER | BASELINE


def job_name(key: JobKey) -> str:
    return f"{key.switch}-s{key.seed}-{key.arm}"


def parse_job_name(name: str) -> JobKey | None:
    """The key of a job named by `job_name`; None for any other name."""
    parts = name.rsplit("-", 2)
    if len(parts) != 3 or parts[2] not in (WRAPPER, BASELINE) or not parts[1].startswith("s"):
        return None
    try:
        return JobKey(parts[0], int(parts[1][1:]), parts[2])
    except ValueError:
        return None


def precision_settings(name: str) -> dict[str, object]:
    """The precision node `precision=<name>` composes (conf/precision/<name>.yaml), as plan settings."""
    written = OmegaConf.to_container(OmegaConf.load(PRECISION_DIR / f"{name}.yaml"))
    return {f"precision.{k}": v for k, v in written.items()}


def switch_settings(switch: str) -> dict[str, object]:
    """What a switch changes against the reference (fp32, one process)."""
    if switch == "ws2":
        return {**precision_settings(REFERENCE), **DDP2}
    return {**precision_settings(switch), **ONE_PROCESS}


def seeds(first: int, count: int) -> list[int]:
    return [first + i for i in range(count)]


def planned_jobs(first_seed: int, count: int, switches: list[str]) -> list[tuple[JobKey, dict[str, object]]]:
    """Every job with its settings: per switch (the reference first), per seed, the wrapper then the baseline.
    A baseline job names the bundled baseline (`"trainer": "baseline"`); the first seed's record parameters."""
    out = []
    for switch in [REFERENCE, *[s for s in switches if s != REFERENCE]]:
        for i, seed in enumerate(seeds(first_seed, count)):
            for arm in (WRAPPER, BASELINE):
                settings = {**CALIBER, **switch_settings(switch), "seed": seed, "observe.params": i == 0}
                if arm == BASELINE:
                    settings["trainer"] = "baseline"
                out.append((JobKey(switch, seed, arm), settings))
    return out
