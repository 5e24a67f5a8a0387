"""The functional probe's plan: one small caliber, the jobs that exercise each capability, and the resume source.

The caliber is a small MLP regression trained 12 AdamW steps at a constant LR (so a resumed run may change
nothing), validated and checkpointed every 4 steps: cheap, and every cadence lands on a step of its own.
Phase 1: `plain` (the wrapper, fp32, one process: training, cadences, logs, the final metric, its checkpoints),
`baseline` (the bundled baseline, same settings: the checkpoint-size reference), one job per precision switch,
`ws2` (DDP at world size 2) and `pg` (the same under a process group evalkit created before the adapter's
`fit`). Phase 2, once `plain` ran: `resume`, the wrapper resumed from a copy of `plain`'s checkpoints written
after a step up to RESUME_AT, copied beside the plain job's run dir (`<probe run dir>/resume-source/`, with the
plain job's `job.json`, so evalkit still compares the settings); it must train steps RESUME_AT+1..12 and only
those.
"""
from __future__ import annotations

import os
import shutil

from evalkit import names
from evalkit.probes.consistency.plan import precision_settings
from evalkit.probes.evidence import JobEvidence
from evalkit.probes.functional.listing import resume_entries

TASK = "mlp_regression"
PLAIN, BASELINE, RESUME, WS2, PG = "plain", "baseline", "resume", "ws2", "pg"
PRECISIONS = ("bf16_mixed", "fp16_mixed")
RESUME_AT = 8                    # the resume starts from the latest checkpoint written after a step up to this
RESUME_SOURCE = "resume-source"  # beside the probe's job dirs: <probe run dir>/resume-source/checkpoints
CALIBER: dict[str, object] = {
    "task.n_train": 512, "task.n_val": 128, "task.in_dim": 16, "task.hidden": 32, "task.depth": 2,
    "task.out_dim": 1, "task.noise": 0.1, "task.dropout": 0.0,
    "train.optimizer": "adamw", "train.lr": 1e-3, "train.weight_decay": 0.0, "train.schedule": "constant",
    "train.warmup_steps": 0, "train.batch_size": 16, "train.grad_accum": 1, "train.grad_clip": None,
    "train.max_steps": 12, "train.val_every": 4, "train.ckpt_every": 4, "train.num_workers": 0,
    "observe.warmup_steps": 0, "observe.profile": "full", "observe.memory_every": 4,
    "faults.kill_after_step": 0, "faults.kill_in_save_after_step": 0, "faults.oom_at_step": 0,
    "faults.loss_error_at_step": 0,
}
ONE_PROCESS = {"distributed.name": "none", "distributed.world_size": 1, "distributed.init_by": "adapter"}
DDP2 = {"distributed.name": "ddp", "distributed.world_size": 2}


def job_settings(name: str) -> dict[str, object]:
    """The settings of a phase-1 job."""
    reference = {**CALIBER, **precision_settings("fp32"), **ONE_PROCESS}
    if name == PLAIN:
        return reference
    if name == BASELINE:
        return {**reference, "trainer": "baseline"}
    if name in PRECISIONS:
        return {**CALIBER, **precision_settings(name), **ONE_PROCESS}
    if name == WS2:
        return {**reference, **DDP2}
    if name == PG:
        return {**reference, **DDP2, "distributed.init_by": "evalkit"}
    raise ValueError(f"{name} is not a job of the functional probe")


def first_phase() -> list[str]:
    return [PLAIN, BASELINE, *PRECISIONS, WS2, PG]


def resume_settings(resume_from: str) -> dict[str, object]:
    return {**job_settings(PLAIN), "resume_from": resume_from}


def prepare_resume_source(plain: JobEvidence | None) -> tuple[str | None, str]:
    """Copy `plain`'s checkpoint entries written after a step up to RESUME_AT (and its job.json and run.json) to
    `<probe run dir>/resume-source/`: (the copied checkpoints directory, "") or (None, why there is none)."""
    if plain is None:
        return None, f"{RESUME} not run: {PLAIN} did not run"
    entries = resume_entries(plain, RESUME_AT)
    ckpt_dir, run_dir = plain.tags.get(names.CHECKPOINT_DIR), plain.tags.get(names.RUN_DIR)
    if not entries:
        why = f" ({PLAIN} ended {plain.status}: {plain.failure_reason})" if plain.status != "FINISHED" else ""
        return None, f"{RESUME} not run: {PLAIN} kept no checkpoint written after a step up to {RESUME_AT}{why}"
    if not ckpt_dir or not run_dir or not os.path.isdir(ckpt_dir):
        return None, f"{RESUME} not run: {PLAIN}'s checkpoint directory {ckpt_dir} is not on this machine"
    source = os.path.join(os.path.dirname(os.path.abspath(run_dir)), RESUME_SOURCE)
    if os.path.isdir(source):
        shutil.rmtree(source)
    target = os.path.join(source, os.path.basename(os.path.normpath(ckpt_dir)))
    os.makedirs(target)
    for entry in entries:
        path = os.path.join(ckpt_dir, entry["name"])
        if os.path.isdir(path):
            shutil.copytree(path, os.path.join(target, entry["name"]))
        elif os.path.exists(path):
            shutil.copy2(path, os.path.join(target, entry["name"]))
    for name in (names.JOB_FILE, names.RUN_FILE):     # the writer's settings: evalkit compares them on resume
        if os.path.exists(os.path.join(run_dir, name)):
            shutil.copy2(os.path.join(run_dir, name), os.path.join(source, name))
    return target, ""
