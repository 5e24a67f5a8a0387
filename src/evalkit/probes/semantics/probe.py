"""The semantic probe as the runner sees it: the truth caliber's jobs (plan.py), then the judge (judge.py)."""
from __future__ import annotations

from omegaconf import DictConfig

from evalkit.caliber import caliber_tag
from evalkit.probes.base import PlannedJob
from evalkit.probes.evidence import JobEvidence
from evalkit.probes.findings import ProbeResult
from evalkit.probes.semantics.plan import (
    ADAMW,
    TASK,
    TOKENS,
    TRUTH_CALIBER,
    adamw_job_name,
    job_name,
    short_epoch,
    short_epoch_job_name,
    token_world_sizes,
    tokens_job_name,
)
from evalkit.probes.your_task import adapted, task_of


class SemanticsProbe:
    name = "semantics"
    dimension = "semantics"
    timed = False

    def task(self, cfg: DictConfig) -> str:
        return task_of(cfg, TASK)

    def caliber(self, cfg: DictConfig) -> str:
        return caliber_tag("truth", hw=cfg.hardware.name, bs=TRUTH_CALIBER["train.batch_size"],
                           accum=TRUTH_CALIBER["train.grad_accum"], prec="fp32", ws=cfg.probe.world_sizes,
                           opt=cfg.probe.get("optimizers", ["sgd"]), short_epoch=bool(cfg.probe.get("short_epoch")),
                           tokens=bool(cfg.probe.get("tokens")))

    def plan(self, cfg: DictConfig, done: dict[str, JobEvidence]) -> tuple[list[PlannedJob], list[str]]:
        """Per world size the job without clipping first (seed s), then the one with clipping (seed s + 1) at
        the norm `oracle.clip_norm_for` gives from the first one's config: the lowest decile of the windows' largest
        partial sums along the oracle's own run at seed s + 1, so that clipping binds on most of the clip job's steps
        and on most windows' partial sums. A clip
        job left out (no norm) is noted here and is an evidence gap for the judge (inconclusive, not a pass). On a
        team's task (`your_task`), every job but the token caliber's trains it, at the caliber's training settings."""
        jobs, notes = [], []
        optimizers = list(cfg.probe.get("optimizers", ["sgd"]))
        for world in cfg.probe.world_sizes if "sgd" in optimizers else ():
            free, clipped = job_name(world, False), job_name(world, True)
            base = {**TRUTH_CALIBER, "distributed.name": "ddp" if world > 1 else "none",
                    "distributed.world_size": world}
            if False in cfg.probe.clip and free not in done:
                jobs.append(PlannedJob(free, {**base, "seed": cfg.seed}))
            if True not in cfg.probe.clip or clipped in done:
                continue
            norm = self._clip_norm(done.get(free))
            if norm is None and False in cfg.probe.clip:
                if free in done:   # the job without clipping ran, but gave no norm to clip at
                    notes.append(f"{clipped} not run: {free} recorded no gradient to choose a clipping norm from")
                continue           # wait for the job without clipping
            jobs.append(PlannedJob(clipped, {**base, "seed": cfg.seed + 1, "train.grad_clip": norm or 1.0}))
        world = min(cfg.probe.world_sizes)
        if "adamw" in optimizers and adamw_job_name(world) not in done:
            jobs.append(PlannedJob(adamw_job_name(world), {
                **TRUTH_CALIBER, **ADAMW, "distributed.name": "ddp" if world > 1 else "none",
                "distributed.world_size": world, "seed": cfg.seed + 2}))
        if cfg.probe.get("short_epoch") and short_epoch_job_name(world) not in done:
            jobs.append(PlannedJob(short_epoch_job_name(world), {
                **TRUTH_CALIBER, **short_epoch(world), "distributed.name": "ddp" if world > 1 else "none",
                "distributed.world_size": world, "seed": cfg.seed + 3}))
        for tokens in token_world_sizes(cfg.probe.world_sizes) if cfg.probe.get("tokens") else ():
            if tokens_job_name(tokens) not in done:
                jobs.append(PlannedJob(tokens_job_name(tokens), {
                    **TOKENS, "distributed.name": "ddp" if tokens > 1 else "none", "distributed.world_size": tokens,
                    "seed": cfg.seed + 4}))
        return adapted(cfg, jobs, notes), notes

    @staticmethod
    def _clip_norm(job: JobEvidence | None) -> float | None:
        if job is None:
            return None
        from evalkit.probes.semantics.oracle import clip_norm_for

        norm = clip_norm_for(job)
        return float(f"{norm:.6g}") if norm else None

    def judge(self, jobs: list[JobEvidence]) -> ProbeResult:
        from evalkit.probes.semantics.judge import judge

        return judge(jobs)
