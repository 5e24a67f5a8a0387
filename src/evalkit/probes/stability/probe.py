"""The stability probe as the runner sees it: faults first, then the resumes that recover from them."""
from __future__ import annotations

import os

from omegaconf import DictConfig

from evalkit import names
from evalkit.caliber import caliber_tag
from evalkit.probes.base import PlannedJob
from evalkit.probes.evidence import JobEvidence
from evalkit.probes.findings import ProbeResult
from evalkit.probes.stability import plan as P
from evalkit.probes.stability.corrupt import prepare


class StabilityProbe:
    name = "stability"
    dimension = "stability"
    timed = False

    def __init__(self):
        self.leak_limit, self.log_limit = P.LEAK_FLOOR, P.LOG_FLOOR

    def task(self, cfg: DictConfig) -> str:
        return P.TASK

    def caliber(self, cfg: DictConfig) -> str:
        ws = sorted({1, *[w for w in cfg.probe.world_sizes if w == 2]})
        return caliber_tag("stability", hw=cfg.hardware.name, bs=P.CALIBER["train.batch_size"], steps=P.STEPS,
                           ckpt_every=P.EVERY, prec="fp32", ws=ws, long=cfg.probe.long_steps)

    def plan(self, cfg: DictConfig, done: dict[str, JobEvidence]) -> tuple[list[PlannedJob], list[str]]:
        self.leak_limit, self.log_limit = cfg.probe.leak_kb_per_1k_steps, cfg.probe.log_kb_per_1k_steps
        wanted = P.wanted_jobs(list(cfg.probe.only))
        first = P.first_phase(list(cfg.probe.world_sizes), cfg.probe.long_steps)
        todo = [PlannedJob(n, s) for n, s in first.items() if n not in done and (wanted is None or n in wanted)]
        if todo:
            return todo, []
        jobs, notes = [], []
        for name, source in P.RESUMES.items():
            if name in done or source not in done or (wanted is not None and name not in wanted):
                continue
            killed = done[source]
            if killed.status == "FINISHED":
                notes.append(f"{source}: the injected kill never fired, so {name} was not run")
                continue
            jobs.append(PlannedJob(name, P.resume_settings(name, killed.tags.get(names.CHECKPOINT_DIR, ""))))
        for kind in (P.INTACT_KIND, *P.CORRUPTIONS):
            name = P.corrupt_name(kind)
            if name in done or (wanted is not None and name not in wanted):
                continue
            source = done["other-model" if kind == "other-model" else "reference"]
            if source.status != "FINISHED":
                notes.append(f"{name} not run: {source.name} failed ({source.failure_reason})")
                continue
            dest = os.path.join(os.path.dirname(source.tags[names.RUN_DIR]), f"{name}-checkpoint")
            try:
                what = prepare(kind, source.tags[names.CHECKPOINT_DIR], source.summary.get("checkpoints", []),
                               dest, at_most=2 * P.EVERY)
            except (OSError, KeyError) as exc:
                notes.append(f"{name} not run: no checkpoint to {'copy' if kind == P.INTACT_KIND else 'damage'} "
                             f"({exc})")
                continue
            notes.append(f"{name}: {what}")
            jobs.append(PlannedJob(name, {**P.CALIBER, "resume_from": dest}))
        return jobs, notes

    def judge(self, jobs: list[JobEvidence]) -> ProbeResult:
        from evalkit.probes.stability.judge import judge

        return judge(jobs, self.leak_limit, self.log_limit)


PROBE = StabilityProbe()
