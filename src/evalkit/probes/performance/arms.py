"""The performance probe's jobs as its judge and its report read them (ArmJob: which depth and arm a job ran), and
the training-memory call at the largest depth (Memory)."""
from __future__ import annotations

from dataclasses import dataclass, field

from evalkit.names import STARTUP_MILESTONES as MILESTONES
from evalkit.probes.evidence import JobEvidence
from evalkit.probes.performance.plan import parse_name, size_name

MIB = 2**20
# copies with the baseline's memory differed by up to 2.2 MiB over 120 pairs (docs/probes/performance.md)
MEMORY_NOISE_MIB = 2.5
# On a team's model the noise between two processes of one program is its own: identical copies of the baseline on
# resnet18 differed by -6.0 to +8.4 MiB (the baseline's own training memory 31.6 to 40.0 MiB over 6 runs; 2 of 6 then
# failed on memory), on hf_causal_lm by -3.9 to +3.1 MiB (scripts/bench_performance_probe.py --override task=...).
# No single noise floor holds both, so there the memory difference is reported and the cell names it as not judged.
NOT_JUDGED = "not judged"
YOUR_MODEL_MEMORY = ("two processes of one program differ by more on a team's model than on mlp_regression, where the "
                     "memory noise is calibrated (identical copies of the baseline on resnet18: -6.0 to +8.4 MiB)")


@dataclass
class ArmJob:
    """One job as the judge reads it."""

    name: str
    depth: int
    arm: str
    job: JobEvidence
    startup: dict[str, float] = field(default_factory=dict)

    @classmethod
    def of(cls, job: JobEvidence) -> "ArmJob":
        depth, arm = parse_name(job.name)
        s = job.summary
        return cls(job.name, depth, arm, job,
                   {m: float(s[f"startup_{m}_s"]) for m in MILESTONES if s.get(f"startup_{m}_s") is not None})

    @property
    def finished(self) -> bool:
        return self.job.status == "FINISHED"

    @property
    def turns(self) -> dict:
        return self.job.summary.get("turns") or {}

    @property
    def train_mib(self) -> float | None:
        value = self.job.summary.get("peak_mem_bytes")
        return None if value is None else value / MIB

    @property
    def import_mib(self) -> float | None:
        value = self.job.summary.get("import_rss_bytes")
        return None if value is None else value / MIB


@dataclass
class Memory:
    call: str               # within | outside | undecided | unmeasured | not judged (a team's model)
    depth: int | None = None
    baseline_mib: float | None = None
    wrapper_mib: float | None = None
    budget_mib: float | None = None

    @property
    def note(self) -> str:
        if self.call == "unmeasured":
            return "training memory not measured at the largest depth"
        if self.call == NOT_JUDGED:
            return (f"training memory on your model: {self.wrapper_mib:.1f} MiB against the baseline's "
                    f"{self.baseline_mib:.1f} MiB ({self.wrapper_mib - self.baseline_mib:+.1f} MiB), not judged: "
                    f"{YOUR_MODEL_MEMORY}")
        said = {"within": "within", "outside": "above", "undecided": "not decided against"}[self.call]
        return (f"training memory at {size_name(self.depth)}: {self.wrapper_mib:.1f} MiB against the baseline's "
                f"{self.baseline_mib:.1f} MiB ({self.wrapper_mib - self.baseline_mib:+.1f} MiB), {said} the budget of "
                f"+{self.budget_mib:.1f} MiB (two runs of one program differ by up to {MEMORY_NOISE_MIB:g} MiB)")
