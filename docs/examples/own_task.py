"""A team's own task, outside evalkit: its own nn.Module and Dataset, brought to every probe (docs/tasks.md).

Run it from any directory this module is importable from:

    PYTHONPATH=/path/to/folder/with/this/file evalkit task=third_party task._target_=own_task.build \
        task.name=own_task +task.extra.n_train=256 +task.extra.n_val=64 +task.extra.hidden=32 probe=semantics

The model carries what real models carry and a synthetic MLP does not: BatchNorm running statistics (buffers),
an input embedding tied to the output projection (one tensor under two names), and a frozen parameter that never
receives a gradient.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import Dataset

from evalkit.tasks.catalog import Metric, Task


class Sequences(Dataset):
    """Windows of a noisy periodic signal, quantised to `vocab` levels; the target is the level that follows."""

    def __init__(self, n: int, vocab: int, length: int, generator: torch.Generator):
        phase = torch.rand(n, 1, generator=generator) * 6.283
        t = torch.arange(length + 1, dtype=torch.float32)
        wave = torch.sin(phase + 0.4 * t) + 0.3 * torch.randn(n, length + 1, generator=generator)
        self.levels = ((wave.clamp(-1.5, 1.5) + 1.5) / 3.0 * (vocab - 1)).round().long()
        self.length = length

    def __len__(self) -> int:
        return len(self.levels)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.levels[i, :self.length], self.levels[i, self.length]


class TiedNet(nn.Module):
    """Embedding -> MLP with BatchNorm -> projection back onto the embedding (tied weights) -> logits."""

    def __init__(self, vocab: int, length: int, hidden: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.body = nn.Sequential(nn.Linear(length * hidden, hidden), nn.BatchNorm1d(hidden), nn.GELU(),
                                  nn.Linear(hidden, hidden))
        self.out = nn.Linear(hidden, vocab, bias=False)
        self.out.weight = self.embed.weight                      # tied: one parameter, two names
        self.temperature = nn.Parameter(torch.ones(()), requires_grad=False)   # frozen: never gets a gradient

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.out(self.body(self.embed(tokens).flatten(1))) / self.temperature


def _accuracy(out: torch.Tensor, y: torch.Tensor) -> tuple[float, int]:
    return float((out.argmax(-1) == y).sum()), y.numel()


def build(seed: int, *, n_train: int, n_val: int, hidden: int = 32, vocab: int = 16, length: int = 8) -> Task:
    """The task evalkit trains: everything from `seed`, nothing downloaded."""
    g = torch.Generator().manual_seed(seed)
    train, val = Sequences(n_train, vocab, length, g), Sequences(n_val, vocab, length, g)
    torch.manual_seed(seed)                                      # the model's initial weights depend on the seed only
    return Task("own_task", TiedNet(vocab, length, hidden), train, val, nn.CrossEntropyLoss(),
                Metric("accuracy", True, _accuracy, scale="absolute"))
