"""probe=customization: the schema of its settings (conf/probe/customization.yaml sets them) and its part in
evalkit-eval."""
from __future__ import annotations

from dataclasses import dataclass, field

from omegaconf import MISSING

from evalkit.config import AT_LEAST_0, AT_LEAST_1, POSITIVE, ProbeConfig, Range
from evalkit.presets import ProbePlan
from evalkit.probes.dimension import Dimension


@dataclass
class CustomizationLimits:
    """The customizations' settings, and the cost a customization may have and pass."""

    l1_weight: float = MISSING           # the custom loss's hyper-parameter: task loss + l1_weight * mean |output|
    stop_at_step: int = MISSING          # the custom callback ends training after this many optimizer steps
    max_line_ratio: float = MISSING      # logical lines of a customization / the baseline's for the same one (same run)
    max_private: int = MISSING           # touches of a wrapper's private state (attributes, internal modules, patches)


@dataclass
class CustomizationProbeConfig(ProbeConfig):
    customization: CustomizationLimits = field(default_factory=CustomizationLimits)

    @staticmethod
    def ranges() -> dict[str, Range]:
        return {"customization.l1_weight": POSITIVE, "customization.stop_at_step": AT_LEAST_1,
                "customization.max_line_ratio": AT_LEAST_1, "customization.max_private": AT_LEAST_0}


PRESETS = {   # two customized runs each
    "quick": ProbePlan([], ("aligned",), jobs_per_run=2, job_s=1.0),
    "thorough": ProbePlan([], jobs_per_run=2, job_s=1.0),
}

# What the verdict shows of it (evalkit.probes.dimension): its column, its place on the first screen, its section.
DIMENSION = Dimension(question="what do a custom loss and a custom callback cost?",
                      column=6, asks=6, says="What it costs to customize", cap=120,
                      report_title=("Customization probe: a custom loss and a custom callback, verified, their cost "
                                    "from the source"),
                      words="custom_code",
                      weights={"research": 3.0, "platform": 0.5})
