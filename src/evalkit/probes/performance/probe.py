"""The performance probe as the runner sees it: one phase of alternating jobs (plan.py), then the judge."""
from __future__ import annotations

from omegaconf import DictConfig

from evalkit.probes.base import PlannedJob
from evalkit.probes.evidence import JobEvidence
from evalkit.probes.findings import ProbeResult
from evalkit.probes.performance.plan import TASK, plan_jobs, timed_threads


class PerformanceProbe:
    name = "performance"
    dimension = "performance"
    timed = True

    def task(self, cfg: DictConfig) -> str:
        return TASK

    def caliber(self, cfg: DictConfig) -> str:
        from evalkit.controller.job import worker_threads

        threads = timed_threads(cfg) or worker_threads(cfg)
        widths = ",".join(str(w) for w in cfg.probe.widths)
        return (f"timed|hw={cfg.hardware.name}|thr={threads}|prec={cfg.precision.name}"
                f"|ws={cfg.distributed.world_size}|bs={cfg.train.batch_size}|h={widths}|steps={cfg.probe.steps}"
                f"|r={cfg.probe.repeats}")

    def plan(self, cfg: DictConfig, done: dict[str, JobEvidence]) -> tuple[list[PlannedJob], list[str]]:
        return ([] if done else plan_jobs(cfg)), []

    def judge(self, jobs: list[JobEvidence]) -> ProbeResult:
        from evalkit.probes.performance.judge import judge

        return judge(jobs)


PROBE = PerformanceProbe()
