"""A probe on the team's own task: which task a probe's jobs train, and which of its caliber's task settings apply.

Every probe's caliber is written for `mlp_regression` (CALIBER_TASK): its settings shape that MLP (`task.hidden`,
`task.depth`, ...) as well as the data (`task.n_train`, `task.n_val`). A probe that runs on a team's task
(`runs_on_your_task`) trains the task the config names whenever that is not CALIBER_TASK: the model as the team
configured it, with the caliber's training settings (optimizer, schedule, batches, steps, precision, observation)
and of its task settings only the data sizes (DATA_KEYS), which shape the caliber's epochs and windows. Those are set
where the task takes them (a bundled task's keys, or `task.extra` of `task=third_party`); a task that takes neither
keeps its own sizes, and the probe's notes say so. docs/tasks.md says which probe needs what.
"""
from __future__ import annotations

from typing import Any

from omegaconf import DictConfig

from evalkit.probes.base import PlannedJob
from evalkit.tasks import CALIBER_TASK

DATA_KEYS = ("n_train", "n_val")
WIDTH_KEYS = ("hidden", "width")      # the setting that makes a task's model wider, in the order looked for


def on_your_task(cfg: DictConfig) -> bool:
    """The config names a task other than the calibers' own: probes that can run on it do."""
    task = cfg.get("task")
    return task is not None and str(task.name) != CALIBER_TASK


def task_of(cfg: DictConfig, own: str) -> str:
    """The task a probe that runs on a team's task trains: the config's own, else the probe's caliber task `own`."""
    return str(cfg.task.name) if on_your_task(cfg) else own


def _where(task: DictConfig, key: str) -> str | None:
    """The config key that sets the builder argument `key` of this task: `task.<key>` or `task.extra.<key>`."""
    if key in task and key != "extra":
        return f"task.{key}"
    if "extra" in task and task.extra is not None and key in task.extra:
        return f"task.extra.{key}"
    return None


def adapt(cfg: DictConfig, settings: dict[str, Any], notes: list[str] | None = None) -> dict[str, Any]:
    """A caliber job's settings for the config's task: unchanged on CALIBER_TASK; on a team's task, its `task.*`
    settings reduced to the data sizes the task takes (each moved to where the task takes it); a data size it does
    not take goes to `notes`, once."""
    if not on_your_task(cfg) or "task" in settings:     # the caliber task, or another bundled task the plan names
        return settings
    out = {k: v for k, v in settings.items() if not k.startswith("task.")}
    for key in DATA_KEYS:
        if f"task.{key}" not in settings:
            continue
        where = _where(cfg.task, key)
        if where is not None:
            out[where] = settings[f"task.{key}"]
        elif notes is not None:
            note = (f"task {cfg.task.name} takes no {key} argument: its jobs train on its own "
                    f"{'training' if key == 'n_train' else 'validation'} set, not the caliber's "
                    f"{settings[f'task.{key}']} samples")
            if note not in notes:
                notes.append(note)
    return out


def adapted(cfg: DictConfig, jobs: list[PlannedJob], notes: list[str]) -> list[PlannedJob]:
    """Each planned job with its settings adapted to the config's task (`adapt`)."""
    return [PlannedJob(j.name, adapt(cfg, dict(j.overrides), notes)) for j in jobs]


def wider(cfg: DictConfig) -> dict[str, Any] | None:
    """Settings that build the config's task with a model twice as wide (a checkpoint of it does not fit the task's
    own model); None when the task has no width setting (WIDTH_KEYS)."""
    for key in WIDTH_KEYS:
        where = _where(cfg.task, key)
        if where is not None:
            return {where: 2 * int(cfg.task[key] if where == f"task.{key}" else cfg.task.extra[key])}
    return None
