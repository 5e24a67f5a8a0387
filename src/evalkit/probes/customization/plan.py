"""The customization probe's plan: two jobs, each the wrapper's adapter with one customization added.

Caliber: a small MLP regression trained by plain SGD (no momentum, constant LR, no clipping), so that each
optimizer step's update is `-lr * gradient` and the judge can recompute, from the recorded parameters and the
samples the step saw, whether the custom loss's gradient made it. `loss`: the custom-loss adapter
(`trainer.customizations.loss`), one micro-batch per step. `callback`: the custom-callback adapter
(`trainer.customizations.callback`) with 2 micro-batches per step and more steps than one epoch holds before the
stop, so a callback firing per micro-batch or per epoch shows; it must end training after `stop_at_step` steps.
"""
from __future__ import annotations

from omegaconf import DictConfig

from evalkit.probes.consistency.plan import precision_settings
from evalkit.probes.functional.plan import ONE_PROCESS

TASK = "mlp_regression"
LOSS, CALLBACK = "loss", "callback"
CUSTOMIZATIONS = (LOSS, CALLBACK)
PARAM_NORM = "custom/param_norm"     # the value the callbacks report (adapters/custom/options.py: the same name)
CALIBER: dict[str, object] = {
    "task.n_train": 256, "task.n_val": 64, "task.in_dim": 8, "task.hidden": 16, "task.depth": 2,
    "task.out_dim": 1, "task.noise": 0.1, "task.dropout": 0.0,
    "train.optimizer": "sgd", "train.momentum": 0.0, "train.lr": 0.05, "train.weight_decay": 0.0,
    "train.schedule": "constant", "train.warmup_steps": 0, "train.batch_size": 16, "train.grad_clip": None,
    "train.val_every": 0, "train.ckpt_every": 0, "train.num_workers": 0,
    "observe.warmup_steps": 0, "observe.profile": "full", "observe.params": True, "observe.sample_ids": True,
    "observe.memory_every": 0, "faults.kill_after_step": 0, "faults.kill_in_save_after_step": 0,
    "faults.oom_at_step": 0, "faults.loss_error_at_step": 0, **ONE_PROCESS, **precision_settings("fp32"),
}
LOSS_STEPS = 12
CALLBACK_ACCUM = 2          # micro-batches per optimizer step in the callback job
EPOCH_STEPS = 256 // 16 // CALLBACK_ACCUM   # optimizer steps per epoch in the callback job (8)


def callback_steps(stop_at_step: int) -> int:
    """max_steps of the callback job: beyond the stop, so that a callback that does not stop training shows."""
    return max(stop_at_step + 6, EPOCH_STEPS + 4)


def job_settings(name: str, cfg: DictConfig, target: str) -> dict[str, object]:
    limits = cfg.probe.customization
    if name == LOSS:
        return {**CALIBER, "trainer._target_": target, "trainer.options": {"l1_weight": float(limits.l1_weight)},
                "train.grad_accum": 1, "train.max_steps": LOSS_STEPS}
    if name == CALLBACK:
        return {**CALIBER, "trainer._target_": target,
                "trainer.options": {"stop_at_step": int(limits.stop_at_step)},
                "train.grad_accum": CALLBACK_ACCUM, "train.max_steps": callback_steps(int(limits.stop_at_step))}
    raise ValueError(f"{name} is not a job of the customization probe")
