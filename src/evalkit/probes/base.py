"""What a probe is to the runner (controller/probe_run.py): a plan (the jobs it needs, phase after phase) and a
judge (records -> result)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from omegaconf import DictConfig

from evalkit.probes.evidence import JobEvidence
from evalkit.probes.findings import ProbeResult


@dataclass(frozen=True)
class PlannedJob:
    """One job of a probe: its name within the probe and the settings that differ from the probe's config."""

    name: str
    overrides: dict[str, Any] = field(default_factory=dict)


class Probe(Protocol):
    name: str           # the `probe=<name>` choice
    dimension: str      # the verdict column it fills
    timed: bool         # its jobs' wall time is a measurement: they never run beside anything

    def caliber(self, cfg: DictConfig) -> str:
        """The probe run's caliber tag: the conditions its jobs run at."""

    def task(self, cfg: DictConfig) -> str:
        """The task its jobs train."""

    def plan(self, cfg: DictConfig, done: dict[str, JobEvidence]) -> tuple[list[PlannedJob], list[str]]:
        """The next jobs to run, given the evidence of those already run (none left: an empty list), and
        notes on what the plan leaves out (e.g. a world size the hardware cannot run)."""

    def judge(self, jobs: list[JobEvidence]) -> ProbeResult:
        """The result, from the jobs' stored records only (a pure function: never trains). A probe that also
        has `measure(cfg) -> dict` (what its jobs cannot record: sources, installed packages) is judged as
        `judge(jobs, measured)`, with what `measure` returned after the jobs ran."""
