"""The stability probe's plan: faults injected into small jobs, then the jobs that recover from them.

Caliber: an MLP regression with dropout (so training draws on the RNG and a lost RNG state shows) and BatchNorm
(buffers besides the parameters: running statistics a checkpoint must hold, recorded with them), AdamW (whose
moments a lost optimizer state changes), warm-up then cosine decay (whose position a lost scheduler state
changes), 24 steps of 16 samples on 320 samples: 20 steps an epoch, so a resume after step 18 crosses an epoch's
end. A checkpoint every 6 steps, validation at the same cadence, parameters recorded after every step.

Phase 1: `reference` (uninterrupted); `kill-between` (SIGKILL after step 9: between the checkpoints of steps 6 and
12); `kill-after-ckpt` (after step 18, right after its checkpoint); `kill-in-save` (halfway through writing the
checkpoint of step 12); `oom` and `loss-error` (at step 5); `other-model` (a wider model's checkpoint, for the
damaged-checkpoint items); at world size 2 `reference-ws2` and `kill-ws2`; `long-run` when `probe.long_steps`, and
beside it `long-run-baseline`, the hand-written baseline's long run on the same settings (the trainer `baseline`, as
the consistency and performance probes run their control arm): the wrapper's memory and log growth is judged
against it (`longrun.py`).
Phase 2, from phase 1's checkpoints: `resume-between`, `resume-after-ckpt`, `resume-in-save`, `resume-ws2`, and
`corrupt-truncated`, `corrupt-flipped`, `corrupt-other-model` (resumes offered a damaged copy: `corrupt.py`), with
their control `resume-intact` (a resume of an undamaged copy of the same checkpoint: a damaged copy's refusal counts
only when the intact copy's resume succeeds).
"""
from __future__ import annotations

from evalkit.probes.catalog import probe_yamls
from evalkit.probes.consistency.plan import precision_settings

TASK = "mlp_regression"
STEPS, EVERY = 24, 6
KILL_BETWEEN, KILL_AFTER_CKPT, KILL_IN_SAVE = 9, 18, 9
FAULT_STEP = 5
CALIBER: dict[str, object] = {
    "task.n_train": 320, "task.n_val": 64, "task.in_dim": 16, "task.hidden": 32, "task.depth": 2,
    "task.out_dim": 1, "task.noise": 0.1, "task.dropout": 0.1, "task.batchnorm": True,
    "train.optimizer": "adamw", "train.lr": 0.003, "train.weight_decay": 0.01, "train.schedule": "cosine",
    "train.warmup_steps": 3, "train.min_lr_ratio": 0.1, "train.batch_size": 16, "train.grad_accum": 1,
    "train.grad_clip": 1.0, "train.max_steps": STEPS, "train.val_every": EVERY, "train.ckpt_every": EVERY,
    "train.num_workers": 0, "observe.sample_ids": True, "observe.params": True, "observe.warmup_steps": 0,
    "observe.profile": "full", "resume_from": None,
    **precision_settings("fp32"), "distributed.name": "none", "distributed.world_size": 1,
}
DDP2 = {"distributed.name": "ddp", "distributed.world_size": 2}
OTHER_MODEL = {"task.hidden": 48, "train.max_steps": EVERY}

# phase-2 job -> (the phase-1 job whose checkpoints it resumes from, world size 2)
RESUMES = {"resume-between": "kill-between", "resume-after-ckpt": "kill-after-ckpt",
           "resume-in-save": "kill-in-save", "resume-ws2": "kill-ws2"}
CORRUPTIONS = ("truncated", "flipped", "other-model")
INTACT, INTACT_KIND = "resume-intact", "intact"   # the damaged-checkpoint items' control: an undamaged copy, resumed
LONG_BASELINE = "long-run-baseline"
# The long run's floors (KiB per 1,000 steps) over the baseline's slope: probe.leak_kb_per_1k_steps and
# probe.log_kb_per_1k_steps as conf/probe/stability.yaml sets them, what a judge without a config applies (longrun.py:
# the rule and how each was calibrated).
LEAK_FLOOR, LOG_FLOOR = (float(probe_yamls()["stability"][key]) for key in ("leak_kb_per_1k_steps",
                                                                            "log_kb_per_1k_steps"))
REFERENCE_OF = {"resume-between": "reference", "resume-after-ckpt": "reference", "resume-in-save": "reference",
                "resume-ws2": "reference-ws2"}


# item -> the jobs it needs (`probe.only` picks items; none picked: every item)
ITEM_JOBS = {
    "kill_between": ("reference", "kill-between", "resume-between"),
    "kill_after_checkpoint": ("reference", "kill-after-ckpt", "resume-after-ckpt"),
    "kill_during_write": ("reference", "kill-in-save", "resume-in-save"),
    "kill_ws2": ("reference-ws2", "kill-ws2", "resume-ws2"),
    "corrupt_truncated": ("reference", INTACT, "corrupt-truncated"),
    "corrupt_flipped": ("reference", INTACT, "corrupt-flipped"),
    "corrupt_other_model": ("reference", INTACT, "other-model", "corrupt-other-model"),
    "out_of_memory": ("oom",),
    "loss_error": ("loss-error",),
    "long_run": ("long-run", LONG_BASELINE),
}


def wanted_jobs(items: list[str]) -> set[str] | None:
    """The jobs the picked items need; None: every job."""
    return {job for item in items for job in ITEM_JOBS[item]} if items else None


def first_phase(world_sizes: list[int], long_steps: int) -> dict[str, dict[str, object]]:
    jobs: dict[str, dict[str, object]] = {
        "reference": {},
        "kill-between": {"faults.kill_after_step": KILL_BETWEEN},
        "kill-after-ckpt": {"faults.kill_after_step": KILL_AFTER_CKPT},
        "kill-in-save": {"faults.kill_in_save_after_step": KILL_IN_SAVE},
        "oom": {"faults.oom_at_step": FAULT_STEP},
        "loss-error": {"faults.loss_error_at_step": FAULT_STEP},
        "other-model": OTHER_MODEL,
    }
    if 2 in world_sizes:
        jobs["reference-ws2"] = DDP2
        jobs["kill-ws2"] = {**DDP2, "faults.kill_after_step": KILL_BETWEEN}
    if long_steps:
        jobs["long-run"] = long_run_settings(long_steps)
        jobs[LONG_BASELINE] = {**long_run_settings(long_steps), "trainer": "baseline"}
    return {name: {**CALIBER, **settings} for name, settings in jobs.items()}


def long_run_settings(steps: int) -> dict[str, object]:
    """A few thousand short steps, memory sampled about 100 times; no per-step parameters, one checkpoint."""
    return {"train.max_steps": steps, "train.val_every": 0, "train.ckpt_every": 0, "observe.params": False,
            "observe.memory_every": max(1, steps // 100)}


def resume_settings(name: str, checkpoints: str) -> dict[str, object]:
    ws2 = DDP2 if name.endswith("ws2") else {}
    return {**CALIBER, **ws2, "resume_from": checkpoints}


def corrupt_name(kind: str) -> str:
    return INTACT if kind == INTACT_KIND else f"corrupt-{kind}"
