"""The semantic probe's plan: the truth caliber, and the jobs run at it.

The truth caliber is a configuration where what a careful loop must do is computable at every step: a tiny MLP (433
parameters, no dropout), plain SGD, accumulation over 3 micro-batches in epochs of 10 (world size 1) or 5 (world size
2) micro-batches per rank, so every epoch ends on a short window; warm-up then linear decay over 10 optimizer steps
(2.5 epochs at world size 1, 5 at world size 2); fp32; the parameters recorded after every optimizer step; 19
validation samples, so that a distributed sampler that evens out two ranks repeats one (`val.repeated`) while
evalkit's own shards (10 and 9) still give both ranks 3 batches. Per world size, one job without clipping and one
with clipping at a norm that binds on most of its steps, and already on most windows' partial sums, so that clipping
per micro-batch shows (the lowest decile of the windows' largest partial sums along the oracle's own run at the clip
job's seed: `oracle.clip_norm_for`), with another seed, so that a data order which ignores evalkit's seed shows as
the same order under two seeds. Every job is stopped and failed past 120 s, far above the slowest measured
(docs/probes/semantics.md): a wrapper that never completes a window must not hang the probe. With `probe.optimizers`
holding adamw, one more job at the smallest world size: AdamW with weight decay (`ADAMW`), another seed again, so
that the optimizer's param groups, decay and moments are replayed too (`update_rule`): a wrapper that builds its own
optimizer shows which parameters it leaves undecayed. Its model is handed over in eval mode, as `from_pretrained`
returns one: training forwards must still run in train mode (a loop that never calls `model.train()` trains with
dropout off; the caliber's MLP has none, so only the mode differs and the oracle still holds). With
`probe.short_epoch`, one more SGD job at the smallest world size, another seed again, whose epochs hold fewer
micro-batches than one accumulation window (`short_epoch`: 2 per rank, with 3 per window): a careful loop steps once
per epoch on a short window of 2; a loop that counts windows across epochs, drops the short window or carries its
gradient into the next epoch shows it on every step, not once per epoch. With `probe.tokens`, one more SGD job at the
smallest world size, another seed again, on the token caliber (`TOKENS`): the same windows over tiny_lm's
variable-length sequences, padded targets ignored in the loss (1,256 parameters), so the micro-batches of a window
hold different numbers of target tokens and the token mean over the window differs from the mean of micro-batch means
(by how much: docs/probes/semantics.md): the oracle expects the former. Where the plan runs a world size above 1 the
token job runs at the smallest such too (`token_world_sizes`; 5 micro-batches per rank and epoch, windows of 3 and
2), same seed: there the two ranks' windows hold different numbers of tokens, so a per-rank token mean (each rank
dividing by its own tokens, the ranks then averaged) differs from the token mean over the window's tokens on all
ranks, which the oracle expects; at one rank they are the same.
"""
from __future__ import annotations

TRUTH_CALIBER: dict[str, object] = {
    "task.n_train": 41, "task.n_val": 19, "task.in_dim": 8, "task.hidden": 16, "task.depth": 2,
    "task.out_dim": 1, "task.noise": 0.1,
    "train.optimizer": "sgd", "train.momentum": 0.0, "train.weight_decay": 0.0, "train.lr": 0.05,
    "train.schedule": "linear", "train.warmup_steps": 3, "train.min_lr_ratio": 0.0,
    "train.batch_size": 4, "train.grad_accum": 3, "train.grad_clip": None, "train.max_steps": 10,
    "train.val_every": 4, "train.ckpt_every": 0, "train.num_workers": 0,
    "precision.name": "fp32", "precision.autocast_dtype": None, "precision.grad_scaler": False,
    "observe.params": True, "observe.sample_ids": True, "observe.warmup_steps": 0,
    "train.time_limit_s": 120,
}
TASK = "mlp_regression"
ADAMW: dict[str, object] = {"train.optimizer": "adamw", "train.weight_decay": 0.1, "train.betas": [0.9, 0.999],
                            "train.lr": 0.01, "train.model_mode": "eval"}


# the token caliber: TRUTH_CALIBER's training settings on a tiny tiny_lm ("task" names the bundled task first)
TOKENS: dict[str, object] = {
    "task": "tiny_lm", "task.n_train": 41, "task.n_val": 8, "task.vocab_size": 16, "task.seq_len": 12,
    "task.hidden": 8, "task.depth": 1, "task.n_heads": 1,
    **{k: v for k, v in TRUTH_CALIBER.items() if not k.startswith("task.")},
}

SHORT_EPOCH_BATCHES = 2      # micro-batches per rank and epoch in the short-epoch job: fewer than train.grad_accum


def short_epoch(world_size: int) -> dict[str, object]:
    """The short-epoch job's settings: exactly SHORT_EPOCH_BATCHES full micro-batches per rank and epoch, no sample
    over, so that a loader keeping an incomplete last batch (drop_last=False) gives no third micro-batch either."""
    n_train = int(TRUTH_CALIBER["train.batch_size"]) * world_size * SHORT_EPOCH_BATCHES
    return {"task.n_train": n_train}


def job_name(world_size: int, clip: bool) -> str:
    return f"ws{world_size}-{'clip' if clip else 'noclip'}"


def adamw_job_name(world_size: int) -> str:
    return f"ws{world_size}-adamw"


def short_epoch_job_name(world_size: int) -> str:
    return f"ws{world_size}-shortepoch"


def tokens_job_name(world_size: int) -> str:
    return f"ws{world_size}-tokens"


def token_world_sizes(world_sizes) -> list[int]:
    """The world sizes of the token jobs: the smallest, and the smallest above 1 where the plan runs one (a per-rank
    token mean is the token mean itself at one rank, so only several ranks tell them apart): at most two jobs."""
    sizes = sorted(set(int(w) for w in world_sizes))
    return sorted({sizes[0], *[w for w in sizes if w > 1][:1]}) if sizes else []
