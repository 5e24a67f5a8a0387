"""The compile probe's plan: the wrapper eager and compiled, the hand-written loop compiled by hand beside it.

First, untimed, at the semantic probe's truth caliber (one rank, fp32, SGD over windows of 3 micro-batches, the
parameters recorded after every step, validation every 4 steps): the wrapper eager (`truth-eager`), the wrapper
compiled the way its documentation does it (`truth-compiled`, `train.compile=true`) and, unless the wrapper is the
baseline itself, the baseline compiled by hand (`truth-baseline-compiled`). Each compiled job compiles cold, in an
inductor cache of its own (observe/compiled.py). Then, with `probe.rounds` above 0, the timed comparison: the wrapper
eager and compiled, and the baseline eager and compiled, on mlp_regression `probe.hidden` wide and `probe.depth` deep,
alive at once and taking turns one block of steps at a time (schedule.py), each pinned to the timed core and
observed with the light `timing` profile, as the performance probe's jobs are.
"""
from __future__ import annotations

from typing import Any

from omegaconf import DictConfig

from evalkit.probes.base import PlannedJob
from evalkit.probes.performance.plan import MAX_STEPS, timed_threads
from evalkit.probes.semantics.plan import TRUTH_CALIBER
from evalkit.probes.your_task import adapt

TASK = "mlp_regression"
TRUTH, TIMED = "truth", "timed"
EAGER, COMPILED = "eager", "compiled"
BASELINE_EAGER, BASELINE_COMPILED = "baseline-eager", "baseline-compiled"
PAIRS = ((EAGER, COMPILED), (BASELINE_EAGER, BASELINE_COMPILED))    # (eager arm, compiled arm) of each loop


def job_name(phase: str, arm: str) -> str:
    return f"{phase}-{arm}"


def is_baseline(cfg: DictConfig) -> bool:
    return str(cfg.trainer.name) == "baseline"


def _arm(arm: str, settings: dict[str, Any]) -> dict[str, Any]:
    out = {**settings, "train.compile": arm.endswith(COMPILED)}
    if arm.startswith("baseline"):
        out["trainer"] = "baseline"
    return out


def truth_jobs(cfg: DictConfig) -> list[PlannedJob]:
    base = {**TRUTH_CALIBER, "seed": cfg.seed, "distributed.name": "none", "distributed.world_size": 1}
    arms = [EAGER, COMPILED] + ([] if is_baseline(cfg) else [BASELINE_COMPILED])
    return [PlannedJob(job_name(TRUTH, arm), adapt(cfg, _arm(arm, base))) for arm in arms]


def timed_arms(cfg: DictConfig) -> list[str]:
    return [EAGER, COMPILED] + ([] if is_baseline(cfg) else [BASELINE_EAGER, BASELINE_COMPILED])


def timed_jobs(cfg: DictConfig) -> list[PlannedJob]:
    p = cfg.probe
    settings = adapt(cfg, {"task.hidden": p.hidden, "task.depth": p.depth,
                           "train.max_steps": cfg.observe.warmup_steps + MAX_STEPS, "train.val_every": 0,
                           "train.ckpt_every": 0, "observe.profile": "timing", "observe.params": False,
                           "hardware.threads": timed_threads(cfg), "distributed.name": "none",
                           "distributed.world_size": 1})
    return [PlannedJob(job_name(TIMED, arm), _arm(arm, settings)) for arm in timed_arms(cfg)]
