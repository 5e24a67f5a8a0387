"""The compile probe as the runner sees it: the truth caliber's jobs eager and compiled, then, with `probe.rounds`,
the timed jobs taking turns (plan.py, schedule.py), then the judge (judge.py)."""
from __future__ import annotations

from omegaconf import DictConfig

from evalkit.caliber import caliber_tag
from evalkit.probes.base import PlannedJob
from evalkit.probes.compile.plan import TASK, TIMED, timed_jobs, truth_jobs
from evalkit.probes.evidence import JobEvidence
from evalkit.probes.findings import ProbeResult
from evalkit.probes.performance.plan import timed_threads
from evalkit.probes.your_task import task_of


class CompileProbe:
    name = "compile"
    dimension = "compile"
    timed = True

    def task(self, cfg: DictConfig) -> str:
        return task_of(cfg, TASK)

    def caliber(self, cfg: DictConfig) -> str:
        p = cfg.probe
        return caliber_tag("compile", hw=cfg.hardware.name, thr=timed_threads(cfg), h=p.hidden, depth=p.depth,
                           rounds=p.rounds, block=f"{p.block_ms:g}ms")

    def plan(self, cfg: DictConfig, done: dict[str, JobEvidence]) -> tuple[list[PlannedJob], list[str]]:
        if not done:
            return truth_jobs(cfg), []
        if int(cfg.probe.rounds) > 0 and not any(name.startswith(TIMED) for name in done):
            return timed_jobs(cfg), []
        return [], []

    def schedule(self, cfg: DictConfig, jobs: list[PlannedJob]):
        """The timed jobs run together, taking turns (controller/turns/rounds.py); the truth jobs one after another."""
        if not any(j.name.startswith(TIMED) for j in jobs):
            return None
        from evalkit.probes.compile.schedule import CompileSchedule

        return CompileSchedule(cfg)

    def judge(self, jobs: list[JobEvidence]) -> ProbeResult:
        from evalkit.probes.compile.judge import judge

        return judge(jobs)
