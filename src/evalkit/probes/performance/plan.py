"""The performance probe's plan: baseline and wrapper jobs alternating in fresh processes.

For repeat r and each model width (`task.hidden` of mlp_regression) one baseline job and one wrapper job, in the
order baseline, wrapper on even repeats and wrapper, baseline on odd ones (A B B A ...), so a drift of the
machine over the probe's minutes falls on both arms alike. Every job trains `observe.warmup_steps` +
`probe.steps` optimizer steps with the light `timing` observation profile, validates and checkpoints only at the
end (outside the timed window), at the probe config's hardware, precision and world size, its workers pinned to
the same cores in every job (controller.launch.pinned_cpus); the sweep around it never runs another job beside
it (the probe is `timed`).
"""
from __future__ import annotations

from omegaconf import DictConfig

from evalkit.probes.base import PlannedJob

TASK = "mlp_regression"
BASELINE, WRAPPER = "baseline", "wrapper"


def job_name(width: int, repeat: int, arm: str) -> str:
    return f"h{width}-r{repeat}-{arm}"


def parse_name(name: str) -> tuple[int, int, str]:
    """(width, repeat, arm) of a job name `h256-r3-wrapper`."""
    width, repeat, arm = name.split("-", 2)
    return int(width[1:]), int(repeat[1:]), arm


def timed_threads(cfg: DictConfig) -> int:
    """The intra-op threads of a timed job: `hardware.threads`, else one on CPU (the job is pinned to one core,
    the others left to the controller and the system: a wrapper's per-step cost is mostly Python on one core),
    else 0 (torch's default)."""
    return cfg.hardware.threads or (1 if cfg.hardware.device == "cpu" else 0)


def timed_settings(cfg: DictConfig, width: int) -> dict[str, object]:
    warmup = cfg.observe.warmup_steps
    return {"task.hidden": width, "train.max_steps": warmup + cfg.probe.steps, "train.val_every": 0,
            "train.ckpt_every": 0, "observe.profile": "timing", "observe.params": False,
            "hardware.threads": timed_threads(cfg)}


def plan_jobs(cfg: DictConfig) -> list[PlannedJob]:
    jobs = []
    for repeat in range(cfg.probe.repeats):
        for width in cfg.probe.widths:
            arms = (BASELINE, WRAPPER) if repeat % 2 == 0 else (WRAPPER, BASELINE)
            for arm in arms:
                settings = timed_settings(cfg, width)
                if arm == BASELINE:
                    settings["trainer"] = "baseline"
                jobs.append(PlannedJob(job_name(width, repeat, arm), settings))
    return jobs
