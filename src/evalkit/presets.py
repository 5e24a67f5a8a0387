"""What `evalkit-eval` runs: the quick preset (smoke scale, every probe) and `--thorough` (every bundled task, more
seeds, the probes at full scale).

A preset is the training sweep (seeds x trainers x tasks, smoke-scale settings) and one probe multirun per probe,
each with the probe's own settings and the modes it runs in, written beside the probe (the `PRESETS` of its settings
module, evalkit.probes.catalog); every part joins the same sweep id.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass

from evalkit.probes.catalog import schemas

SMOKE = ["task.n_train=512", "task.n_val=128", "train.max_steps=40", "train.val_every=20",
         "tracking.progress_interval_s=30"]
MODES = ("aligned", "defaults")


@dataclass(frozen=True)
class ProbePlan:
    settings: list[str]                 # the probe's overrides in this preset
    modes: tuple[str, ...] = MODES
    jobs_per_run: int = 4               # for the time estimate
    # seconds per job, the probe's measuring included, on a 2-core machine like evalkit's (its quick evaluation,
    # warm workers, every sweep in one process): what evalkit-eval's plan multiplies
    job_s: float = 3.0


@dataclass(frozen=True)
class Preset:
    name: str
    seeds: int
    tasks: tuple[str, ...]


QUICK = Preset("quick", seeds=3, tasks=("mlp_regression",))
THOROUGH = Preset("thorough", seeds=8, tasks=("mlp_regression", "cnn_classification", "tiny_lm"))
PRESETS = {p.name: p for p in (QUICK, THOROUGH)}


def sweep_overrides(preset: Preset, trainers: list[str], seeds, extra: list[str]) -> list[str]:
    """The overrides of the `evalkit -m` training sweep: every seed x task x trainer, smoke scale, then the user's.
    Seed first: Hydra varies the last override fastest, so the arms take turns (seed 0 of every trainer, then
    seed 1, ...) and a machine's drift over the sweep spreads over all arms instead of becoming an arm
    difference."""
    tasks = [f"task={','.join(preset.tasks)}"] if preset.tasks != ("mlp_regression",) else []
    return [f"seed={','.join(str(s) for s in seeds)}", *tasks, f"trainer={','.join(trainers)}", *SMOKE, *extra]


def probe_overrides(probe: str, plan: ProbePlan, wrappers: list[str], extra: list[str]) -> list[str]:
    """One probe's multirun: the probe x wrappers x its modes, its preset settings, then the user's (the probes
    set their own task and training settings; hardware and tracking are the user's)."""
    return [f"probe={probe}", f"trainer={','.join(wrappers)}", f"trainer.mode={','.join(plan.modes)}",
            *plan.settings, *extra]


def plan_for(preset: Preset, probe: str) -> ProbePlan:
    """The probe's plan in the preset (written beside the probe); a probe without one runs with its own defaults, in
    both modes."""
    schema = schemas().get(probe)
    plans = getattr(importlib.import_module(schema.__module__), "PRESETS", {}) if schema else {}
    return plans.get(preset.name, ProbePlan([]))
