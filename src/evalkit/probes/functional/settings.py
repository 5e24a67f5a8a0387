"""probe=functional: the schema of its settings (it has none: its caliber is its own, conf/probe/functional.yaml)
and its part in evalkit-eval."""
from __future__ import annotations

from dataclasses import dataclass

from evalkit.config import ProbeConfig
from evalkit.presets import ProbePlan
from evalkit.probes.dimension import Dimension


@dataclass
class FunctionalProbeConfig(ProbeConfig):
    pass


PRESETS = {
    # Aligned mode: what works at the settings that match the baseline's.
    "quick": ProbePlan([], ("aligned",), jobs_per_run=7, job_s=0.67),
    "thorough": ProbePlan([], jobs_per_run=7, job_s=0.67),
}

# What the verdict shows of it (evalkit.probes.dimension): its column, its place on the first screen, its section.
DIMENSION = Dimension(question="does it train, validate, checkpoint and resume at the cadence asked?",
                      column=1, asks=3, says="What it runs", cap=100,
                      report_title="Functional probe: one item per capability, with its evidence",
                      words="capabilities", sweep="runs",
                      weights={"research": 1.0, "platform": 1.5})
