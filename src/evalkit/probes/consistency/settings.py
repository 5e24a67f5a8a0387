"""probe=consistency: the schema of its settings (conf/probe/consistency.yaml sets them) and its part in
evalkit-eval."""
from __future__ import annotations

from dataclasses import dataclass

from omegaconf import MISSING, DictConfig

from evalkit.config import AT_LEAST_1, ProbeConfig, Range
from evalkit.presets import ProbePlan
from evalkit.probes.dimension import Dimension

SWITCHES = ("bf16_mixed", "fp16_mixed", "ws2")   # stage 3: one switch away from fp32, one process


@dataclass
class ConsistencyProbeConfig(ProbeConfig):
    seeds: int = MISSING                 # seeds per arm, each paired with the baseline's
    switches: list[str] = MISSING        # stage 3: bf16_mixed | fp16_mixed | ws2, one at a time

    @staticmethod
    def ranges() -> dict[str, Range]:
        return {"seeds": AT_LEAST_1}

    @staticmethod
    def problems(probe: DictConfig) -> list[str]:
        unknown = [s for s in probe.switches if s not in SWITCHES]
        return [f"probe.switches: {', '.join(map(str, unknown))} is not a switch: choose among {', '.join(SWITCHES)} "
                "(e.g. probe.switches=[bf16_mixed,ws2])"] if unknown else []


PRESETS = {
    # Step by step and two paired seeds, aligned mode: in defaults mode the wrapper computes something else by
    # design (the semantic probe names what), and two seeds cannot size that difference.
    "quick": ProbePlan(["probe.seeds=2"], ("aligned",), jobs_per_run=4, job_s=0.8),
    "thorough": ProbePlan(["probe.seeds=5", "probe.switches=[bf16_mixed,fp16_mixed,ws2]"], jobs_per_run=40, job_s=0.8),
}

# What the verdict shows of it (evalkit.probes.dimension): its column, its place on the first screen, its section.
DIMENSION = Dimension(question="do its results match the baseline's within seed noise?",
                      column=3, asks=2, says="Whether the results match", cap=100,
                      report_title="Consistency probe: step by step, paired seeds, one switch at a time",
                      words="results_match", sweep="equivalence",
                      weights={"research": 1.5, "platform": 1.5})
