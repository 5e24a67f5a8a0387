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
from evalkit.probes.your_task import adapt, on_your_task, task_of, wider


class StabilityProbe:
    name = "stability"
    dimension = "stability"
    timed = False

    def __init__(self):
        self.leak_limit, self.log_limit = P.LEAK_FLOOR, P.LOG_FLOOR

    def task(self, cfg: DictConfig) -> str:
        return task_of(cfg, P.TASK)

    def caliber(self, cfg: DictConfig) -> str:
        ws = sorted({1, *[w for w in cfg.probe.world_sizes if w == 2]})
        return caliber_tag("stability", hw=cfg.hardware.name, bs=P.CALIBER["train.batch_size"], steps=P.STEPS,
                           ckpt_every=P.EVERY, prec="fp32", ws=ws, long=cfg.probe.long_steps)

    def plan(self, cfg: DictConfig, done: dict[str, JobEvidence]) -> tuple[list[PlannedJob], list[str]]:
        """Phase 1's jobs, then phase 2's from their checkpoints. On a team's task (`your_task`) every job trains it
        at the caliber's training settings; the other model is the task's own twice as wide, and without a width
        setting the other-model item is not run (said in the notes)."""
        jobs, notes = self._plan(cfg, done)
        other = (wider(cfg) or {}) if on_your_task(cfg) else {}
        return [PlannedJob(j.name, {**adapt(cfg, dict(j.overrides), notes),
                                    **(other if j.name == "other-model" else {})}) for j in jobs], notes

    def _plan(self, cfg: DictConfig, done: dict[str, JobEvidence]) -> tuple[list[PlannedJob], list[str]]:
        self.leak_limit, self.log_limit = cfg.probe.leak_kb_per_1k_steps, cfg.probe.log_kb_per_1k_steps
        wanted = P.wanted_jobs(list(cfg.probe.only))
        first = P.first_phase(list(cfg.probe.world_sizes), cfg.probe.long_steps)
        notes = []
        if on_your_task(cfg) and wider(cfg) is None:
            first.pop("other-model")
            notes.append(f"other-model not run: task {cfg.task.name} has no width setting (task.hidden or "
                         "task.width) to build a model whose checkpoint does not fit its own")
        todo = [PlannedJob(n, s) for n, s in first.items() if n not in done and (wanted is None or n in wanted)]
        if todo:
            return todo, notes
        jobs = []
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
            source = done.get("other-model" if kind == "other-model" else "reference")
            if source is None:
                continue
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
