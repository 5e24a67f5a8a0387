"""Poutyne's aligned token windows (issue 33): each micro-batch handed with its target tokens as the batch size
Poutyne's `get_batch_size` reads, so `batches_per_step` weighs each loss by its tokens and divides by the window's:
the token mean over the window, the short last window of an epoch included. Handed as plain tensors, the same
micro-batches give a mean of micro-batch means."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from token_windows import close, sgd_per_window, token_micro_batches, token_model

pytest.importorskip("poutyne")

from poutyne import Model  # noqa: E402

from evalkit.adapters import poutyne as adapter  # noqa: E402
from evalkit.tasks.catalog import TokenLoss, count_tokens  # noqa: E402

JOB = SimpleNamespace(task=SimpleNamespace(loss_terms=count_tokens))


def _fit(batches: list, grad_accum: int, tokens: bool) -> list:
    """One epoch of Poutyne's fit_generator over `batches`, SGD lr 1; the network's parameters after it."""
    model = token_model()
    network = adapter._TokenInputs(model) if tokens else model
    loss = adapter._on_targets(TokenLoss()) if tokens else TokenLoss()
    data = [adapter._token_batch(JOB, x, y) if tokens else (x, y) for x, y in batches]
    Model(network, torch.optim.SGD(model.parameters(), lr=1.0), loss).fit_generator(
        data, None, epochs=1, batches_per_step=grad_accum, verbose=False)
    return list(model.parameters())


def test_handed_its_tokens_as_batch_size_poutyne_takes_the_token_mean_over_each_window():
    batches = token_micro_batches()
    windows = [batches[:3], batches[3:]]                        # grad_accum 3: a window of 3, the epoch's last of 1
    token_mean = sgd_per_window(token_model(), windows, lr=1.0)
    assert close(_fit(batches, 3, tokens=True), token_mean)
    plain = _fit(batches, 3, tokens=False)
    assert close(plain, sgd_per_window(token_model(), windows, lr=1.0, token_mean=False))
    assert not close(plain, token_mean)


def test_the_token_batch_is_what_get_batch_size_reads_and_the_network_and_loss_unwrap():
    from poutyne import get_batch_size

    x, y = token_micro_batches()[0]
    inputs, targets = adapter._token_batch(JOB, x, y)
    assert get_batch_size(inputs, targets) == count_tokens(y) == 13
    model = token_model()
    assert torch.equal(adapter._TokenInputs(model)(inputs), model(x))
    assert torch.equal(adapter._TokenInputs(model)(x), model(x))            # validation hands plain tensors
    assert torch.equal(adapter._on_targets(TokenLoss())(model(x), targets), TokenLoss()(model(x), y))


def test_defaults_declares_the_mean_of_micro_batch_means_only_on_a_token_task_with_accumulation():
    def job(loss_terms, grad_accum):
        return SimpleNamespace(task=SimpleNamespace(loss_terms=loss_terms, train_set=range(64)), batch_size=8,
                               grad_accum=grad_accum, grad_clip=None, max_steps=4,
                               precision=SimpleNamespace(autocast_dtype=None))

    assert "loss_norm" in adapter.defaults_deviations(job(count_tokens, 2), 1, 4)
    assert "loss_norm" not in adapter.defaults_deviations(job(count_tokens, 1), 1, 8)
    assert "loss_norm" not in adapter.defaults_deviations(job(None, 2), 1, 4)
    assert "get_batch_size" in adapter.ALIGNS["loss_norm"]
