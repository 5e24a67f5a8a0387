"""The performance probe as the runner sees it: one phase of jobs run together, taking turns (plan.py,
schedule.py), a second of two profile jobs when the cell is not a pass, then the judge."""
from __future__ import annotations

from omegaconf import DictConfig

from evalkit.caliber import caliber_tag
from evalkit.cpus import worker_threads
from evalkit.probes.base import PlannedJob
from evalkit.probes.evidence import JobEvidence
from evalkit.probes.findings import ProbeResult
from evalkit.probes.performance.plan import PROFILE, TASK, plan_jobs, profile_jobs, timed_threads
from evalkit.probes.your_task import on_your_task, task_of


class PerformanceProbe:
    name = "performance"
    dimension = "performance"
    timed = True

    def task(self, cfg: DictConfig) -> str:
        return task_of(cfg, TASK)

    def caliber(self, cfg: DictConfig) -> str:
        p = cfg.probe.performance
        size = {"task": cfg.task.name} if on_your_task(cfg) else {"h": p.hidden, "depth": sorted(p.depths)}
        return caliber_tag("turns", hw=cfg.hardware.name, thr=timed_threads(cfg) or worker_threads(cfg),
                           prec=cfg.precision.name, ws=cfg.distributed.world_size, bs=cfg.train.batch_size,
                           **size, block=f"{p.block_ms:g}ms", limit=f"{p.time_limit_s:g}s",
                           max_rounds=p.max_rounds, budget=p.budget)

    def plan(self, cfg: DictConfig, done: dict[str, JobEvidence]) -> tuple[list[PlannedJob], list[str]]:
        """First the jobs taking turns; then, when their cell is not a pass and every one of them finished, the two
        profile jobs that say where the added time and memory go."""
        if not done:
            return plan_jobs(cfg), []
        if any(name.endswith(PROFILE) for name in done):
            return [], []
        from evalkit.probes.performance.judge import judge

        verdict = judge(list(done.values()))
        if verdict.passed or any(job.status != "FINISHED" for job in done.values()):   # nothing to attribute
            return [], []
        return profile_jobs(cfg), []

    def schedule(self, cfg: DictConfig, jobs: list[PlannedJob]):
        """The jobs run together, taking turns (controller/turns/rounds.py): the timed ones until decided, the profile
        jobs one block each."""
        from evalkit.probes.performance.schedule import PerformanceSchedule, ProfileSchedule

        if any(j.name.endswith(PROFILE) for j in jobs):
            return ProfileSchedule([j.name for j in jobs])
        return PerformanceSchedule(cfg)

    def judge(self, jobs: list[JobEvidence]) -> ProbeResult:
        from evalkit.probes.performance.judge import judge

        return judge(jobs)
