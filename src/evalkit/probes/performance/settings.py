"""probe=performance: the schema of its settings (conf/probe/performance.yaml sets them) and its part in
evalkit-eval."""
from __future__ import annotations

from dataclasses import dataclass, field

from omegaconf import MISSING

from evalkit.config import AT_LEAST_1, POSITIVE, ProbeConfig, Range
from evalkit.presets import ProbePlan
from evalkit.probes.dimension import Dimension


@dataclass
class PerformanceSettings:
    """How the arms take turns, when the measurement stops, and the budget it is judged by (each figure's
    calibration is in its module's docstring)."""

    depths: list[int] = MISSING          # the model sizes: task.depth of mlp_regression
    hidden: int = MISSING                # ... every hidden layer this wide (task.hidden)
    block_ms: float = MISSING            # the length of one block of optimizer steps (the baseline's), in ms
    time_limit_s: float = MISSING        # the rounds of blocks stop here when nothing was decided before
    max_rounds: int = MISSING            # ... or here (the last planned look)
    reference_step_ms: float = MISSING   # the step time of the model the cost is judged at (your model's)
    budget: float = MISSING              # added time per step, as a fraction of that step, that still passes
    memory_budget: float = MISSING       # added training memory, as a fraction of the baseline's, that still passes


@dataclass
class PerformanceProbeConfig(ProbeConfig):
    # a baseline job and a wrapper job per model size, all alive at once and taking turns (schedule.py)
    performance: PerformanceSettings = field(default_factory=PerformanceSettings)

    @staticmethod
    def ranges() -> dict[str, Range]:
        return {"performance.depths": Range(1, items=True), "performance.hidden": AT_LEAST_1,
                "performance.block_ms": POSITIVE, "performance.time_limit_s": POSITIVE,
                "performance.max_rounds": Range(32), "performance.budget": POSITIVE,
                "performance.reference_step_ms": POSITIVE,
                "performance.memory_budget": POSITIVE}


PRESETS = {
    # Timed: four jobs taking turns at two depths (the fit through two points; three in the thorough preset), the
    # rounds stopped at 12 s when undecided, in both modes: aligned (the wrapper's own cost, its loggers off as in
    # your loop) and defaults (what its quick start costs, loggers and progress bars as it leaves them).
    "quick": ProbePlan(["probe.performance.depths=[2,32]", "probe.performance.time_limit_s=12"],
                       jobs_per_run=6, job_s=4.6),
    "thorough": ProbePlan(["probe.performance.time_limit_s=60"], jobs_per_run=6, job_s=4.6),
}

# What the verdict shows of it (evalkit.probes.dimension): its column, its place on the first screen, its section.
DIMENSION = Dimension(question="what time per step and memory does the wrapper add?",
                      column=4, asks=4, says="What it costs per step and in memory", cap=280,
                      report_title="Performance probe: per-step cost, start-up, training memory",
                      words="step_cost", sweep="budgets",
                      weights={"research": 1.0, "platform": 1.0})
