"""probe=compile: the schema of its settings, its part in evalkit-eval's presets and what the verdict shows of it.
Imported by every config check: no torch here."""
from __future__ import annotations

from dataclasses import dataclass

from omegaconf import MISSING

from evalkit.config import AT_LEAST_0, AT_LEAST_1, POSITIVE, ProbeConfig, Range
from evalkit.presets import ProbePlan
from evalkit.probes.dimension import Dimension


@dataclass
class CompileProbeConfig(ProbeConfig):
    rounds: int = MISSING            # timed rounds, eager and compiled taking turns block by block; 0 = not timed
    hidden: int = MISSING            # the timed jobs' model: mlp_regression this wide ...
    depth: int = MISSING             # ... and this deep
    block_ms: float = MISSING        # a block: this long at the eager arm's warm-up step time
    time_limit_s: float = MISSING    # the timed rounds stop here, whatever their count

    @staticmethod
    def ranges() -> dict[str, Range]:
        return {"rounds": AT_LEAST_0, "hidden": AT_LEAST_1, "depth": AT_LEAST_1, "block_ms": POSITIVE,
                "time_limit_s": POSITIVE}


PRESETS = {
    # Quick: does it compile, what breaks or recompiles, how long compiling takes, and whether a compiled step
    # computes what the eager one does (three untimed jobs, each compiling cold, ~20 s of inductor each here).
    # The timed comparison of compiled and eager steps is the thorough preset's.
    "quick": ProbePlan(["probe.rounds=0"], ("aligned",), jobs_per_run=3, job_s=20.0),
    "thorough": ProbePlan([], jobs_per_run=7, job_s=25.0),
}

# What the verdict shows of it: its column (after the seven bundled ones), its place on the first screen, the
# words there, its report section and its weight in the scenarios.
DIMENSION = Dimension(question="does it train under torch.compile, and what does compiling cost, save and change?",
                      column=8, asks=8, says="Under torch.compile", cap=160,
                      report_title="Compile probe: the wrapper compiled as its documentation does, beside the "
                                   "hand-written loop compiled by hand",
                      weights={"research": 1.0, "platform": 1.0})
