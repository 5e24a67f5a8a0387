"""probe=functional: the schema of its settings (it has none: its caliber is its own, conf/probe/functional.yaml)
and its part in evalkit-eval."""
from __future__ import annotations

from dataclasses import dataclass

from evalkit.config import ProbeConfig
from evalkit.presets import ProbePlan


@dataclass
class FunctionalProbeConfig(ProbeConfig):
    pass


PRESETS = {
    # Aligned mode: what works at the settings that match the baseline's.
    "quick": ProbePlan([], ("aligned",), jobs_per_run=7, job_s=0.67),
    "thorough": ProbePlan([], jobs_per_run=7, job_s=0.67),
}
