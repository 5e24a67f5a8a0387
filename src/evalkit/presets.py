"""What `evalkit-eval` runs: the quick preset (smoke scale, every probe; the functional, stability, customization
and maintenance probes in aligned mode, stability at world size 1) and `--thorough` (every bundled task, more
seeds, consistency under one switch at a time, the performance probe at three model sizes, functional, stability
and customization in both modes, world size 2 and the long run).


A preset is the training sweep (seeds x trainers x tasks, smoke-scale settings) and one probe multirun per probe,
each with the probe's own settings and the modes it runs in; every part joins the same sweep id.
"""
from __future__ import annotations

from dataclasses import dataclass, field

SMOKE = ["task.n_train=512", "task.n_val=128", "train.max_steps=40", "train.val_every=20",
         "tracking.progress_interval_s=30"]
MODES = ("aligned", "defaults")


@dataclass(frozen=True)
class ProbePlan:
    settings: list[str]                 # the probe's overrides in this preset
    modes: tuple[str, ...] = MODES
    jobs_per_run: int = 4               # for the time estimate


@dataclass(frozen=True)
class Preset:
    name: str
    seeds: int
    tasks: tuple[str, ...]
    probes: dict[str, ProbePlan] = field(default_factory=dict)


QUICK = Preset("quick", seeds=3, tasks=("mlp_regression",), probes={
    "semantics": ProbePlan([], jobs_per_run=6),       # per world size 1, 2: no clip, clip; AdamW; short epoch
    # Step by step and two paired seeds, aligned mode: in defaults mode the wrapper computes something else by
    # design (the semantic probe names what), and two seeds cannot size that difference.
    "consistency": ProbePlan(["probe.seeds=2"], ("aligned",), jobs_per_run=4),
    # Timed: four jobs taking turns at two depths (the fit through two points; three in the thorough preset), the
    # rounds stopped at 12 s when undecided, aligned mode
    # (the defaults mode's settings change what is computed, not the wrapper's own cost).
    "performance": ProbePlan(["probe.performance.depths=[2,32]", "probe.performance.time_limit_s=12"], ("aligned",),
                             jobs_per_run=6),
    # Aligned mode: what works, and what survives a kill, at the settings that match the baseline's; world size 2
    # and the long run are the thorough preset's.
    "functional": ProbePlan([], ("aligned",), jobs_per_run=7),
    "stability": ProbePlan(["probe.world_sizes=[1]"], ("aligned",), jobs_per_run=13),
    # Two customized runs each; the environment's figures (imports timed in 3 fresh processes) once per wrapper:
    # they do not depend on the mode.
    "customization": ProbePlan([], ("aligned",), jobs_per_run=2),
    "maintenance": ProbePlan(["probe.maintenance.import_repeats=3"], ("aligned",), jobs_per_run=3),
})

THOROUGH = Preset("thorough", seeds=8, tasks=("mlp_regression", "cnn_classification", "tiny_lm"), probes={
    "semantics": ProbePlan([], jobs_per_run=6),       # per world size 1, 2: no clip, clip; AdamW; short epoch
    "consistency": ProbePlan(["probe.seeds=5", "probe.switches=[bf16_mixed,fp16_mixed,ws2]"], jobs_per_run=40),
    "performance": ProbePlan(["probe.performance.time_limit_s=60"], jobs_per_run=6),
    "functional": ProbePlan([], jobs_per_run=7),
    # The long run: 3,000 steps, memory and log growth sampled 100 times.
    "stability": ProbePlan(["probe.long_steps=3000"], jobs_per_run=18),
    "customization": ProbePlan([], jobs_per_run=2),
    "maintenance": ProbePlan([], ("aligned",), jobs_per_run=4),
})

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
    """The preset's plan for `probe`; a probe the preset does not name runs with its own defaults."""
    return preset.probes.get(probe, ProbePlan([]))
