"""Optimizer and LR-schedule factories, identical for every adapter.

The schedule counts optimizer steps: optimizer step k (1-based) runs with lr = base_lr * factor(k - 1),
where factor(s) = (s + 1) / warmup during warm-up (s < warmup), then decays to min_lr_ratio over the
remaining steps (linear or cosine) or stays at 1 (constant).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

import torch


def make_optimizer(params: Iterable[torch.nn.Parameter], train) -> torch.optim.Optimizer:
    params = list(params)
    if train.optimizer == "adamw":
        return torch.optim.AdamW(params, lr=train.lr, betas=tuple(train.betas), weight_decay=train.weight_decay)
    if train.optimizer == "adam":
        return torch.optim.Adam(params, lr=train.lr, betas=tuple(train.betas), weight_decay=train.weight_decay)
    if train.optimizer == "sgd":
        return torch.optim.SGD(params, lr=train.lr, momentum=train.momentum, weight_decay=train.weight_decay)
    raise ValueError(f"train.optimizer={train.optimizer!r} is not one of adamw, adam, sgd")


@dataclass
class WarmupSchedule:
    """The LR factor as a function of completed scheduler steps (a plain object so state_dict stores it)."""

    kind: str
    warmup_steps: int
    total_steps: int
    min_lr_ratio: float = 0.0

    def __call__(self, s: int) -> float:
        if s < self.warmup_steps:
            return (s + 1) / self.warmup_steps
        if self.kind == "constant":
            return 1.0
        span = max(1, self.total_steps - self.warmup_steps)
        progress = min(1.0, (s - self.warmup_steps) / span)
        if self.kind == "linear":
            return 1.0 - progress * (1.0 - self.min_lr_ratio)
        if self.kind == "cosine":
            return self.min_lr_ratio + (1.0 - self.min_lr_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))
        raise ValueError(f"train.schedule={self.kind!r} is not one of constant, linear, cosine")


def make_scheduler(optimizer: torch.optim.Optimizer, train) -> torch.optim.lr_scheduler.LambdaLR:
    schedule = WarmupSchedule(train.schedule, train.warmup_steps, train.max_steps, train.min_lr_ratio)
    schedule(train.warmup_steps)  # validate the kind now, not at the first step
    return torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
