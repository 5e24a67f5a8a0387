"""probe=maintenance: the schema of its settings (conf/probe/maintenance.yaml sets them) and its part in
evalkit-eval."""
from __future__ import annotations

from dataclasses import dataclass, field

from omegaconf import MISSING

from evalkit.config import AT_LEAST_0, AT_LEAST_1, ProbeConfig, Range
from evalkit.presets import ProbePlan
from evalkit.probes.dimension import Dimension

THRESHOLDS = ("max_deprecations", "max_import_s", "max_import_mib", "max_dependencies", "max_install_mib",
              "max_breaking_per_year", "max_release_age_days")


@dataclass
class MaintenanceLimits:
    """What is measured, and the documented thresholds it is scored by (a team changes them)."""

    max_deprecations: int = MISSING      # distinct deprecation/future warnings the wrapper's own code raised in a run
    max_import_s: float = MISSING        # median seconds to import the wrapper in a fresh process (torch first)
    max_import_mib: float = MISSING      # median resident MiB that importing it adds
    max_dependencies: int = MISSING      # transitive dependencies it installs
    max_install_mib: float = MISSING     # installed size of itself and its dependencies (torch excluded)
    max_breaking_per_year: float = MISSING   # breaking releases in the last 365 days (major; minor for 0.x)
    max_release_age_days: int = MISSING  # the installed version's age when it is not the latest
    allow_core_upper_bounds: bool = MISSING  # an upper bound on torch or numpy anywhere in its dependencies
    import_repeats: int = MISSING        # fresh processes the import cost is the median of
    index_url: str = MISSING             # the package index's JSON API
    cache_dir: str = MISSING             # release history cached here, with its date
    offline: bool = MISSING              # never ask the index: the cache (marked with its date) or "unavailable"
    candidates: list[str] = MISSING      # wrappers not installed whose requirements to read


@dataclass
class MaintenanceProbeConfig(ProbeConfig):
    maintenance: MaintenanceLimits = field(default_factory=MaintenanceLimits)

    @staticmethod
    def ranges() -> dict[str, Range]:
        return {**{f"maintenance.{k}": AT_LEAST_0 for k in THRESHOLDS}, "maintenance.import_repeats": AT_LEAST_1}


PRESETS = {   # the environment's figures once per wrapper (imports timed in 3 fresh processes): not per mode
    "quick": ProbePlan(["probe.maintenance.import_repeats=3"], ("aligned",), jobs_per_run=3, job_s=6.9),
    "thorough": ProbePlan([], ("aligned",), jobs_per_run=4, job_s=6.9),
}

# What the verdict shows of it (evalkit.probes.dimension): its column, its place on the first screen, its section.
DIMENSION = Dimension(question="what does keeping it cost?",
                      column=7, asks=7, says="What it costs to keep", cap=130,
                      report_title=("Maintenance probe: deprecations in a standard run, import cost, dependencies, "
                                    "release history"),
                      words="upkeep",
                      weights={"research": 0.5, "platform": 3.0})
