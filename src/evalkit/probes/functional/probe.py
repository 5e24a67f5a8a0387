"""The functional probe as the runner sees it: phase 1 (every job but the resume), then the resume from a copy
of the plain job's checkpoints, then the judge."""
from __future__ import annotations

from omegaconf import DictConfig

from evalkit.caliber import caliber_tag
from evalkit.probes.base import PlannedJob
from evalkit.probes.evidence import JobEvidence
from evalkit.probes.findings import ProbeResult
from evalkit.probes.functional.plan import (
    CALIBER,
    PLAIN,
    PRECISIONS,
    RESUME,
    RESUME_AT,
    TASK,
    first_phase,
    job_settings,
    prepare_resume_source,
    resume_settings,
)
from evalkit.probes.your_task import adapted, task_of


class FunctionalProbe:
    name = "functional"
    dimension = "functional"
    timed = False

    def task(self, cfg: DictConfig) -> str:
        return task_of(cfg, TASK)

    def caliber(self, cfg: DictConfig) -> str:
        return caliber_tag("functional", hw=cfg.hardware.name, bs=CALIBER["train.batch_size"],
                           steps=CALIBER["train.max_steps"], val=CALIBER["train.val_every"],
                           ckpt=CALIBER["train.ckpt_every"], resume_at=RESUME_AT, prec=("fp32", *PRECISIONS), ws=(1, 2))

    def plan(self, cfg: DictConfig, done: dict[str, JobEvidence]) -> tuple[list[PlannedJob], list[str]]:
        """Phase 1 at once; then the resume, whose checkpoint copy needs the plain job's listing."""
        jobs, notes = self._plan(done)
        return adapted(cfg, jobs, notes), notes

    def _plan(self, done: dict[str, JobEvidence]) -> tuple[list[PlannedJob], list[str]]:
        first = [PlannedJob(name, job_settings(name)) for name in first_phase() if name not in done]
        if first:
            return first, []
        if RESUME in done:
            return [], []
        source, why = prepare_resume_source(done.get(PLAIN))
        if source is None:
            return [], [why]
        return [PlannedJob(RESUME, resume_settings(source))], []

    def judge(self, jobs: list[JobEvidence]) -> ProbeResult:
        from evalkit.probes.functional.judge import judge

        return judge(jobs)
