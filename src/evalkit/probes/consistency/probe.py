"""The consistency probe as the runner sees it: the jobs of plan.py, all in one phase, then the judge."""
from __future__ import annotations

from omegaconf import DictConfig

from evalkit.caliber import caliber_tag
from evalkit.probes.base import PlannedJob
from evalkit.probes.consistency.plan import CALIBER, TASK, job_name, planned_jobs
from evalkit.probes.evidence import JobEvidence
from evalkit.probes.findings import ProbeResult
from evalkit.probes.your_task import adapted, task_of


class ConsistencyProbe:
    name = "consistency"
    dimension = "consistency"
    timed = False

    def task(self, cfg: DictConfig) -> str:
        return task_of(cfg, TASK)

    def caliber(self, cfg: DictConfig) -> str:
        return caliber_tag("consistency", hw=cfg.hardware.name, bs=CALIBER["train.batch_size"],
                           steps=CALIBER["train.max_steps"], prec="fp32", ws=1, seeds=cfg.probe.seeds,
                           switches=list(cfg.probe.switches) or "none")

    def plan(self, cfg: DictConfig, done: dict[str, JobEvidence]) -> tuple[list[PlannedJob], list[str]]:
        """Every job at once (none depends on another's evidence); nothing once they ran."""
        jobs = [PlannedJob(job_name(key), settings)
                for key, settings in planned_jobs(cfg.seed, cfg.probe.seeds, list(cfg.probe.switches))]
        notes: list[str] = []
        return adapted(cfg, [j for j in jobs if j.name not in done], notes), notes

    def judge(self, jobs: list[JobEvidence]) -> ProbeResult:
        from evalkit.probes.consistency.judge import judge

        return judge(jobs)
