"""Token windows for the aligned loops' unit tests (issue 33): micro-batches whose target tokens differ, and the
parameters one SGD step per window on the window's token mean gives (the baseline's normalization), computed directly
on each window's micro-batches put together."""
from __future__ import annotations

import copy

import torch

from evalkit.tasks.catalog import IGNORE_INDEX, TokenLoss

VOCAB, LENGTH = 7, 8
# target tokens per sequence of each micro-batch: 13, 4, 8 and 11 per micro-batch, so a mean of micro-batch means
# is not the token mean
ROWS = ((8, 5), (2, 2), (7, 1), (3, 8))


def token_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Embedding(VOCAB, 4), torch.nn.Linear(4, VOCAB))


def token_micro_batches() -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(0)
    batches = []
    for lengths in ROWS:
        x = torch.randint(1, VOCAB, (len(lengths), LENGTH), generator=g)
        y = torch.randint(1, VOCAB, (len(lengths), LENGTH), generator=g)
        for row, n in enumerate(lengths):
            y[row, n:] = IGNORE_INDEX
        batches.append((x, y))
    return batches


def sgd_per_window(model: torch.nn.Module, windows: list[list], lr: float, token_mean: bool = True) -> list:
    """The parameters after one SGD step per window, on its token mean (or, `token_mean=False`, on the mean of its
    micro-batch means, the normalization the token caliber names `loss_norm.micro_mean`)."""
    model, loss = copy.deepcopy(model), TokenLoss()
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    for window in windows:
        opt.zero_grad()
        if token_mean:
            loss(model(torch.cat([x for x, _ in window])), torch.cat([y for _, y in window])).backward()
        else:
            (sum(loss(model(x), y) for x, y in window) / len(window)).backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


def close(params: list, expected: list) -> bool:
    return all(torch.allclose(p.detach(), e, atol=1e-6) for p, e in zip(params, expected))
