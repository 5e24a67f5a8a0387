"""Accelerate's aligned token windows (issue 33): on a token task the aligned loop runs the accumulation guide's
"training samples of variable size" skeleton with a real Accelerator: windows fetched first (the epoch's last one
shorter), each loss x its tokens x gradient_accumulation_steps / the window's tokens, one optimizer step per window.
The parameters are those of one SGD step per window on the window's token mean."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from token_windows import close, sgd_per_window, token_micro_batches, token_model

pytest.importorskip("accelerate")

from accelerate import Accelerator  # noqa: E402
from accelerate.state import AcceleratorState, GradientState  # noqa: E402

from evalkit.adapters.accelerate_loop import AccelerateAdapter, normalization_deviations  # noqa: E402
from evalkit.contract import TrainJob  # noqa: E402
from evalkit.tasks.catalog import TokenLoss, count_tokens  # noqa: E402


@pytest.fixture
def accelerator():
    yield Accelerator(cpu=True, gradient_accumulation_steps=3)
    AcceleratorState._reset_state(True)
    GradientState._reset_state()


def test_each_window_of_a_token_task_steps_on_its_token_mean_the_short_last_one_included(accelerator):
    batches = token_micro_batches()
    job = SimpleNamespace(grad_accum=3, grad_clip=None, task=SimpleNamespace(loss_terms=count_tokens),
                          device=torch.device("cpu"), distributed=False, world_size=1)
    job.token_weights = lambda targets: TrainJob.token_weights(job, targets)
    model = token_model()
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    net, opt, sched = accelerator.prepare(model, opt, torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0))
    windows = AccelerateAdapter("aligned")._token_windows(job, accelerator, (net, opt, sched, TokenLoss()), batches,
                                                          0, len(batches))
    assert list(windows) == [3, 4]                                   # micro-batches of the epoch after each step
    expected = sgd_per_window(token_model(), [batches[:3], batches[3:]], lr=1.0)
    assert close(list(model.parameters()), expected)
    assert not close(expected, sgd_per_window(token_model(), [batches[:3], batches[3:]], lr=1.0, token_mean=False))


def test_the_quick_start_on_a_token_task_declares_its_mean_of_micro_batch_means_and_aligned_declares_none():
    """Defaults mode divides by gradient_accumulation_steps (accelerator.backward): on a token task a mean of
    micro-batch means wherever a window holds several micro-batches or ranks. Aligned mode's skeleton divides a token
    task's windows by their tokens, the short last one included; a fixed-terms task keeps the short-window division."""
    def job(loss_terms, grad_accum=3, world_size=1):
        return SimpleNamespace(task=SimpleNamespace(loss_terms=loss_terms), grad_accum=grad_accum,
                               world_size=world_size)

    assert normalization_deviations(job(count_tokens), "defaults") == ["window.short_underscaled", "loss_norm"]
    assert normalization_deviations(job(count_tokens, 1, 2), "defaults") == ["window.short_underscaled", "loss_norm"]
    assert normalization_deviations(job(count_tokens, 1), "defaults") == ["window.short_underscaled"]
    assert normalization_deviations(job(count_tokens), "aligned") == []
    assert normalization_deviations(job(None), "aligned") == ["window.short_underscaled"]
    assert "variable size" in AccelerateAdapter.aligns["loss_norm"]
