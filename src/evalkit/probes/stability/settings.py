"""probe=stability: the schema of its settings (conf/probe/stability.yaml sets them) and its part in evalkit-eval."""
from __future__ import annotations

from dataclasses import dataclass

from omegaconf import MISSING, DictConfig

from evalkit.config import AT_LEAST_0, ProbeConfig, Range
from evalkit.presets import ProbePlan
from evalkit.probes.dimension import Dimension
from evalkit.probes.stability.plan import ITEM_JOBS


@dataclass
class StabilityProbeConfig(ProbeConfig):
    world_sizes: list[int] = MISSING     # 1, and 2 for the kill and resume at world size 2
    long_steps: int = MISSING            # optimizer steps of the long run (memory, logs); 0 = no long run
    only: list[str] = MISSING            # only these items (kill_between, ...); [] = all
    # the long run's growth is judged against the baseline's long run beside it (longrun.py); these floors (KiB per
    # 1,000 steps over the baseline's upper bound) ignore allocator noise
    leak_kb_per_1k_steps: float = MISSING   # memory (calibrated in tests/unit/probes/stability/test_judge.py)
    log_kb_per_1k_steps: float = MISSING    # logs

    @staticmethod
    def ranges() -> dict[str, Range]:
        return {"world_sizes": Range(1, items=True), "long_steps": AT_LEAST_0, "leak_kb_per_1k_steps": AT_LEAST_0,
                "log_kb_per_1k_steps": AT_LEAST_0}

    @staticmethod
    def problems(probe: DictConfig) -> list[str]:
        unknown = [i for i in probe.only if i not in ITEM_JOBS]
        return [f"probe.only: {', '.join(map(str, unknown))} is not a stability item: choose among "
                f"{', '.join(ITEM_JOBS)} (e.g. probe.only=[kill_between,out_of_memory])"] if unknown else []


PRESETS = {
    # Aligned mode: what survives a kill at the settings that match the baseline's; world size 2 and the long run
    # (3,000 steps, memory and log growth sampled 100 times) are the thorough preset's.
    "quick": ProbePlan(["probe.world_sizes=[1]"], ("aligned",), jobs_per_run=13, job_s=0.8),
    "thorough": ProbePlan(["probe.long_steps=3000"], jobs_per_run=18, job_s=0.8),
}

# What the verdict shows of it (evalkit.probes.dimension): its column, its place on the first screen, its section.
DIMENSION = Dimension(question="does it survive a kill, a damaged checkpoint, an error, and resume exactly?",
                      column=5, asks=5, says="Under kill, corrupt and out-of-memory drills", cap=200,
                      report_title="Stability probe: kill and resume, damaged checkpoints, errors, long run",
                      words="drills",
                      weights={"research": 0.5, "platform": 3.0})
