"""probe=semantics: the schema of its settings (conf/probe/semantics.yaml sets them) and its part in evalkit-eval."""
from __future__ import annotations

from dataclasses import dataclass

from omegaconf import MISSING, DictConfig

from evalkit.config import ProbeConfig, Range
from evalkit.presets import ProbePlan
from evalkit.probes.dimension import Dimension

OPTIMIZERS = ("sgd", "adamw")


@dataclass
class SemanticsProbeConfig(ProbeConfig):
    world_sizes: list[int] = MISSING     # the world sizes of the SGD jobs
    clip: list[bool] = MISSING           # per world size: a job without clipping (false), one with it (true)
    # the optimizers of the truth caliber's jobs: sgd (the jobs above, per world size) and adamw (one job with weight
    # decay at the smallest world size: the optimizer's param groups and decay)
    optimizers: list[str] = MISSING
    short_epoch: bool = MISSING          # one more SGD job at the smallest world size, epochs shorter than a window
    # one more SGD job at the smallest world size on the token caliber (tiny_lm: micro-batches of different numbers
    # of target tokens; the oracle expects the token mean over the window), and one at the smallest world size above
    # 1 when world_sizes holds one (a per-rank token mean differs from the window's over all ranks only there)
    tokens: bool = MISSING

    @staticmethod
    def ranges() -> dict[str, Range]:
        return {"world_sizes": Range(1, items=True)}

    @staticmethod
    def problems(probe: DictConfig) -> list[str]:
        problems = ["probe.clip=[] runs no job: e.g. probe.clip=[false,true]"] if not probe.clip else []
        if not probe.optimizers or any(o not in OPTIMIZERS for o in probe.optimizers):
            problems.append(f"probe.optimizers={list(probe.optimizers)}: choose among {', '.join(OPTIMIZERS)} "
                            "(e.g. probe.optimizers=[sgd,adamw])")
        return problems


PRESETS = {   # per world size 1, 2: no clip, clip; AdamW; short epoch; tokens at world sizes 1 and 2
    "quick": ProbePlan([], jobs_per_run=8, job_s=0.9),
    "thorough": ProbePlan([], jobs_per_run=8, job_s=0.9),
}

# What the verdict shows of it (evalkit.probes.dimension): its column, its place on the first screen, its section.
DIMENSION = Dimension(question="does every optimizer step do what a careful loop does?",
                      column=2, asks=1, says="What differs from your loop", cap=170,
                      words="step_for_step", differences=True,
                      weights={"research": 1.0, "platform": 1.0})
