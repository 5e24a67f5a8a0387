"""Refuse a resume that would splice two experiments under one label, before any worker starts.

A resumed run records steps k+1..N and is tagged with this job's config, while everything up to step k (the
weights, the optimizer moments, the scheduler's state, the data position) comes from the job that wrote the
checkpoint. For the resumed curve to continue the old one, the two jobs must agree on whatever shaped those
steps or decides the next ones:
- the trainer (name, `_target_`, mode): another wrapper's checkpoint is another layout and another arm;
- the task, every field but `metric_margin` (a threshold of the verdict; it shapes no step);
- `seed` (initial weights, data order), `train.batch_size`, `train.grad_accum` and `distributed.world_size`
  (samples per step and where each rank's data order resumes), the precision (every field);
- the update rule: optimizer, lr, betas, momentum, weight_decay, grad_clip, schedule, warmup_steps, min_lr_ratio;
- `train.max_steps` unless the schedule is constant: linear and cosine decay over max_steps, and the scheduler
  state in the checkpoint keeps the old horizon, so a changed max_steps follows neither schedule;
- and always `train.max_steps` above the checkpoint's step (otherwise nothing trains and the run ends empty).
Free to change: cadences (`val_every`, `ckpt_every`), `num_workers`, hardware (the recorded steps and their
timings are this job's), observers, tracking, `repeat`, `run_name` and `trainer.options` (wrapper knobs that
are recorded as params; an adapter that cannot resume under other options says so itself).

The job that wrote a checkpoint is found from the checkpoint: `<run dir>/checkpoints/...` beside
`<run dir>/job.json` (its resolved config) and `run.json` (its MLflow run). A checkpoint from elsewhere is
not refused: a warning says its settings could not be compared, and the run is tagged so.
"""
from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig, OmegaConf

from evalkit import names

MUST_MATCH = ("seed", "train.batch_size", "train.grad_accum", "distributed.world_size", "train.optimizer",
              "train.lr", "train.betas", "train.momentum", "train.weight_decay", "train.grad_clip", "train.schedule",
              "train.warmup_steps", "train.min_lr_ratio")
GROUPS_MUST_MATCH = ("task", "precision")
FREE_IN_GROUPS = ("task.metric_margin",)
# Every adapter's checkpoint name: step_XXXXXXXX(.pt|.ckpt) files and Accelerate's step_XXXXXXXX/ directories
# (TrainJob.checkpoint_path), Ignite's checkpoint_N.pt, the transformers Trainer's checkpoint-N/ directories.
CHECKPOINT_NAME = re.compile(r"(?:step|checkpoint)[_-](\d+)(?:\.[A-Za-z]+)?")
_UNSET = object()



@dataclass(frozen=True)
class Mismatch:
    what: str        # "seed=1, but the checkpoint was written with seed=0"
    fix: str         # "seed=0"


@dataclass(frozen=True)
class ResumeSource:
    path: str                       # resume_from, absolute
    step: int | None                # the step it resumes at (None: a layout evalkit does not know)
    run_dir: str | None             # the run dir of the evalkit job that wrote it (None: from elsewhere)
    config: dict | None             # that job's resolved config
    run_id: str | None              # that job's MLflow run


def _get(config: dict, dotted: str) -> Any:
    value: Any = config
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return _UNSET
        value = value[part]
    return value


def _override(value: Any) -> str:
    """A value as it is written on the command line."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, dict)):
        return json.dumps(value).replace(" ", "")
    return str(value)


def _differs(key: str, new: dict, old: dict) -> Mismatch | None:
    before, now = _get(old, key), _get(new, key)
    if before is _UNSET or now is _UNSET or before == now:
        return None   # a key the older job did not have cannot be compared
    return Mismatch(f"{key}={_override(now)}, but the checkpoint was written with {key}={_override(before)}",
                    f"{key}={_override(before)}")


def _trainer_mismatch(new: dict, old: dict) -> Mismatch | None:
    ours, theirs = new.get("trainer", {}), old.get("trainer", {})
    if (ours.get("name"), ours.get("_target_")) != (theirs.get("name"), theirs.get("_target_")):
        fix = (f"trainer={theirs.get('name')}" if ours.get("name") != theirs.get("name")
               else f"trainer._target_={theirs.get('_target_')}")
        return Mismatch(f"it was written by trainer {theirs.get('name')} ({theirs.get('_target_')}), this job runs "
                        f"{ours.get('name')} ({ours.get('_target_')})", fix)
    return _differs("trainer.mode", new, old)


def _max_steps_mismatch(new: dict, old: dict, step: int | None) -> Mismatch | None:
    ours, theirs = new["train"]["max_steps"], _get(old, "train.max_steps")
    schedule = new["train"].get("schedule")
    decays = schedule != "constant" and theirs is not _UNSET
    if step is not None and ours <= step:
        fix = (f"train.max_steps={theirs}" if decays and theirs > step
               else "an earlier checkpoint" if decays else f"train.max_steps above {step}")
        return Mismatch(f"train.max_steps={ours} is not above the checkpoint's step {step} (nothing would train)", fix)
    if decays and ours != theirs:
        return Mismatch(f"train.max_steps={ours}, but the checkpoint's {schedule} schedule decays over "
                        f"train.max_steps={theirs}", f"train.max_steps={theirs}")
    return None


def resume_mismatches(new: dict, old: dict, step: int | None) -> list[Mismatch]:
    """What keeps a job with resolved config `new` from continuing the job with config `old` from its
    checkpoint at `step` (None: unknown); [] when it may resume."""
    found = [_trainer_mismatch(new, old)]
    for group in GROUPS_MUST_MATCH:
        keys = sorted(set(new.get(group, {})) | set(old.get(group, {})))
        found += [_differs(f"{group}.{k}", new, old) for k in keys if f"{group}.{k}" not in FREE_IN_GROUPS]
    found += [_differs(key, new, old) for key in MUST_MATCH]
    found.append(_max_steps_mismatch(new, old, step))
    return [m for m in found if m is not None]


def refusal(path: str, mismatches: list[Mismatch]) -> str:
    """The one-line refusal naming every mismatch, both values and the fix."""
    fixes = " and ".join(dict.fromkeys(m.fix for m in mismatches))
    return (f"resume_from={path} cannot continue the run that wrote it: {'; '.join(m.what for m in mismatches)}: "
            f"resume with {fixes}, or start without resume_from")


def checkpoint_step(path: str) -> int | None:
    """The step an adapter resumes at from `path`: its own when it is one checkpoint, else the latest inside
    the directory; None for a layout evalkit does not know."""
    own = CHECKPOINT_NAME.fullmatch(os.path.basename(os.path.normpath(path)))
    if own:
        return int(own.group(1))
    if not os.path.isdir(path):
        return None
    steps = [int(m.group(1)) for m in map(CHECKPOINT_NAME.fullmatch, os.listdir(path)) if m]
    return max(steps, default=None)


def _written_by(path: str) -> tuple[str, dict] | None:
    """(run dir, job.json) of the evalkit job whose checkpoint directory holds `path`, or None."""
    folder = path if os.path.isdir(path) else os.path.dirname(path)
    for candidate in (folder, os.path.dirname(folder), os.path.dirname(os.path.dirname(folder))):
        try:
            with open(os.path.join(candidate, names.JOB_FILE)) as fh:
                spec = json.load(fh)
            # by name, not by absolute path: a run dir moved aside (archived, copied) keeps its layout
            ckpt_dir = os.path.join(candidate, os.path.basename(spec["ckpt_dir"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if os.path.commonpath([ckpt_dir, path]) == ckpt_dir:
            return candidate, spec
    return None


def _run_id(run_dir: str) -> str | None:

    try:
        with open(os.path.join(run_dir, names.RUN_FILE)) as fh:
            return json.load(fh).get("run_id")
    except (OSError, ValueError, AttributeError):
        return None


def resume_source(resume_from: str) -> ResumeSource:
    path = os.path.abspath(resume_from)
    found = _written_by(path) if os.path.exists(path) else None
    run_dir, spec = found if found else (None, {})
    return ResumeSource(path, checkpoint_step(path) if os.path.exists(path) else None, run_dir,
                        spec.get("config"), _run_id(run_dir) if run_dir else None)


def check_resume(cfg: DictConfig) -> str | None:
    """Why this job cannot resume from `cfg.resume_from` (checked before launch), or None. A checkpoint
    that no evalkit job wrote is not refused: a warning says its settings could not be compared."""
    if not cfg.resume_from:
        return None
    source = resume_source(cfg.resume_from)
    if not os.path.exists(source.path):
        return (f"resume_from={source.path} does not exist: give a checkpoint file or the checkpoints/ directory "
                "of an earlier run (its evalkit.checkpoint_dir tag)")
    if source.config is None:
        print(f"[evalkit] warning: resume_from={source.path} has no {names.JOB_FILE} of the evalkit job that wrote it "
              "(expected in the directory above its checkpoints/): its settings cannot be compared with this job's",
              file=sys.stderr, flush=True)
        return None
    mismatches = resume_mismatches(OmegaConf.to_container(cfg, resolve=True), source.config, source.step)
    return refusal(source.path, mismatches) if mismatches else None


def resume_tags(cfg: DictConfig) -> dict[str, str]:
    """Provenance of a resumed run: the checkpoint, the run that wrote it and the step it resumes at."""
    if not cfg.resume_from:
        return {}
    source = resume_source(cfg.resume_from)
    tags = {names.RESUMED_FROM: source.path, names.RESUMED_FROM_RUN: source.run_id,
            names.RESUMED_AT_STEP: None if source.step is None else str(source.step)}
    if source.config is None and os.path.exists(source.path):
        tags[names.RESUME_UNCHECKED] = (f"no {names.JOB_FILE} of the job that wrote the checkpoint: "
                                        "settings not compared")
    return {k: v for k, v in tags.items() if v is not None}
