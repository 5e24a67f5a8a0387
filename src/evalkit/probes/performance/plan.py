"""The performance probe's plan: at each model size a baseline job and a wrapper job, all run together.

The sizes are depths (`task.depth` of mlp_regression, every hidden layer `probe.performance.hidden` wide): the step
time grows with the depth while every tensor keeps its size. Wider layers were measured and refused: there two
identical copies of the baseline differ far more in step time and training memory, run after run (what the C
allocator does with large blocks differs from one process to the next); the figures: docs/probes/performance.md,
"Thresholds and their calibration". Each size gets one baseline job and one wrapper job; the runner starts all of
them one after another and lets them take turns (`schedule.py`). Every job trains with the light `timing` observation
profile, no validation or checkpoint, its workers pinned to the same cores as every other job's (cpus.pinned_cpus):
the jobs never run at once, each waits at the turn table while another's block runs. `train.max_steps` is only a cap:
the turn table ends the jobs when the measurement is decided.
"""
from __future__ import annotations

from omegaconf import DictConfig

from evalkit.probes.base import PlannedJob
from evalkit.probes.your_task import adapt, on_your_task

TASK = "mlp_regression"
YOURS = 0                   # the size label of a team's task, timed as configured (no depth sweep)
BASELINE, WRAPPER = "baseline", "wrapper"
MAX_STEPS = 1_000_000       # a cap the turn table never lets a job reach
PROFILE_STEPS = 50          # the profile jobs' profiled steps (after the warm-up)
PROFILE = "-profile"        # the profile jobs' names: d32-baseline-profile, d32-wrapper-profile


def sizes(cfg: DictConfig) -> list[int]:
    """The sizes the probe times: mlp_regression's depths (`probe.performance.depths`), or on a team's task its model
    as configured (YOURS), whose own step time is then the reference step (one size: no fit)."""
    return [YOURS] if on_your_task(cfg) else sorted(cfg.probe.performance.depths)


def size_name(depth: int) -> str:
    return "your model" if depth == YOURS else f"d{depth}"


def job_name(depth: int, arm: str) -> str:
    return f"d{depth}-{arm}"


def parse_name(name: str) -> tuple[int, str]:
    """(depth, arm) of a job name `d8-wrapper`."""
    depth, arm = name.split("-", 1)
    return int(depth[1:]), arm


def timed_threads(cfg: DictConfig) -> int:
    """The intra-op threads of a timed job: `hardware.threads`, else one on CPU (the job is pinned to one core,
    the others left to the controller and the system: a wrapper's per-step cost is mostly Python on one core),
    else 0 (torch's default)."""
    return cfg.hardware.threads or (1 if cfg.hardware.device == "cpu" else 0)


def timed_settings(cfg: DictConfig, depth: int) -> dict[str, object]:
    return adapt(cfg, {"task.hidden": cfg.probe.performance.hidden, "task.depth": depth,
                       "train.max_steps": cfg.observe.warmup_steps + MAX_STEPS, "train.val_every": 0,
                       "train.ckpt_every": 0, "observe.profile": "timing", "observe.params": False,
                       "hardware.threads": timed_threads(cfg)})


def profile_jobs(cfg: DictConfig) -> list[PlannedJob]:
    """The two untimed jobs that say where the added time and memory go: both arms at the largest depth, profiled
    over PROFILE_STEPS steps (observe.call_profile). They start together and run one block each, one after the
    other (schedule.ProfileSchedule): nothing else runs while one is profiled."""
    depth = max(sizes(cfg))
    jobs = []
    for arm in (BASELINE, WRAPPER):
        settings = {**timed_settings(cfg, depth), "observe.call_profile": PROFILE_STEPS}
        if arm == BASELINE:
            settings["trainer"] = "baseline"
        jobs.append(PlannedJob(job_name(depth, arm) + PROFILE, settings))
    return jobs


def plan_jobs(cfg: DictConfig) -> list[PlannedJob]:
    jobs = []
    for depth in sizes(cfg):
        for arm in (BASELINE, WRAPPER):
            settings = timed_settings(cfg, depth)
            if arm == BASELINE:
                settings["trainer"] = "baseline"
            jobs.append(PlannedJob(job_name(depth, arm), settings))
    return jobs
