"""The maintenance probe as the runner sees it: one standard run (its deprecation warnings recorded), then the
installed environment measured: import cost, dependencies, release history (offline-safe)."""
from __future__ import annotations

import os
from typing import Any

from omegaconf import DictConfig, OmegaConf

from evalkit.caliber import caliber_tag
from evalkit.probes.base import PlannedJob
from evalkit.probes.evidence import JobEvidence
from evalkit.probes.findings import ProbeResult
from evalkit.probes.functional.plan import CALIBER as STANDARD
from evalkit.probes.functional.plan import ONE_PROCESS
from evalkit.probes.maintenance.plan import STANDARD_RUN, TASK
from evalkit.probes.your_task import adapted, task_of


class MaintenanceProbe:
    name = "maintenance"
    dimension = "maintenance"
    timed = False

    def task(self, cfg: DictConfig) -> str:
        return task_of(cfg, TASK)

    def caliber(self, cfg: DictConfig) -> str:
        limits = cfg.probe.maintenance
        return caliber_tag("maintenance", hw=cfg.hardware.name, steps=STANDARD["train.max_steps"],
                           val_ckpt_every=STANDARD["train.val_every"], import_repeats=limits.import_repeats,
                           index="offline" if limits.offline else limits.index_url)

    def plan(self, cfg: DictConfig, done: dict[str, JobEvidence]) -> tuple[list[PlannedJob], list[str]]:
        if STANDARD_RUN in done:
            return [], []
        notes: list[str] = []
        return adapted(cfg, [PlannedJob(STANDARD_RUN, {**STANDARD, **ONE_PROCESS, "observe.deprecations": True})],
                       notes), notes

    def measure(self, cfg: DictConfig) -> dict[str, Any]:
        from evalkit.probes.maintenance.measure import measure_environment

        return measure_environment(cfg.trainer, OmegaConf.to_container(cfg.probe.maintenance, resolve=True),
                                   cache_dir=os.path.expanduser(cfg.probe.maintenance.cache_dir))

    def judge(self, jobs: list[JobEvidence], measured: dict[str, Any] | None = None) -> ProbeResult:
        from evalkit.probes.maintenance.judge import judge

        return judge(jobs, measured or {})
