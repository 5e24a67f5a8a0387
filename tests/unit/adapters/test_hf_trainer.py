"""The transformers Trainer adapter's token normalization (issue 33): in aligned mode on a token task its
`compute_loss_func` turns each micro-batch's token mean into the window's token mean (the baseline's), given the
window's token count the Trainer passes as `num_items_in_batch`; a Trainer that cannot take one leaves it and says
so."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("transformers")

from adapters import hf_trainer  # noqa: E402
from adapters.hf_trainer import HFTrainerAdapter, TokenWindowLoss  # noqa: E402
from evalkit.tasks.catalog import IGNORE_INDEX, count_tokens  # noqa: E402


def _token_mean(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE_INDEX)


def test_the_micro_batch_losses_of_a_window_add_up_to_its_token_mean_not_to_the_mean_of_their_means():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(6, 5, 7, generator=g)
    targets = torch.randint(1, 7, (6, 5), generator=g)
    targets[0, 1:] = IGNORE_INDEX                   # micro-batch 1: 1 + 5 tokens, micro-batch 2: 5 + 2 + 5 + 5
    targets[3, 2:] = IGNORE_INDEX
    micro = [(logits[:2], targets[:2]), (logits[2:], targets[2:])]
    window_tokens = count_tokens(targets)
    loss = TokenWindowLoss(_token_mean, count_tokens)
    summed = sum(loss({"logits": out}, y, num_items_in_batch=torch.tensor(window_tokens)) for out, y in micro)
    assert torch.allclose(summed, _token_mean(logits, targets))
    mean_of_means = sum(_token_mean(out, y) for out, y in micro) / 2
    assert not torch.allclose(summed, mean_of_means, atol=1e-3)          # what the Trainer computes without it
    assert torch.equal(loss({"logits": logits[:2]}, targets[:2]), _token_mean(logits[:2], targets[:2]))   # eval


def _job(loss_terms):
    return SimpleNamespace(task=SimpleNamespace(loss_terms=loss_terms))


def test_only_aligned_mode_on_a_token_task_with_a_trainer_that_takes_the_count_normalizes_by_tokens(monkeypatch):
    aligned, defaults = HFTrainerAdapter(mode="aligned"), HFTrainerAdapter(mode="defaults")
    assert aligned._token_window(_job(count_tokens)) and not aligned._token_window(_job(None))
    assert not defaults._token_window(_job(count_tokens))                  # the quick start, as it is written
    monkeypatch.setattr(hf_trainer, "takes_compute_loss_func", lambda: False)   # transformers before 4.46
    assert not aligned._token_window(_job(count_tokens))
    assert "4.46" in next(d.text for d in HFTrainerAdapter.deviations if d.code == "loss_norm")
    assert "loss_norm" in HFTrainerAdapter.aligns


def test_an_argument_an_older_trainingarguments_lacks_is_left_out_only_when_it_asks_for_nothing():
    """transformers 4.45.2 (`trainer.env`) has no average_tokens_across_devices: off, it is left out and said; a
    setting the run needs that the version lacks is refused, never dropped."""
    from evalkit.contract import UnsupportedCombination

    taken, left_out = hf_trainer.version_arguments({"max_steps": 3, "planted_feature": False, "planted_count": 0})
    assert taken == {"max_steps": 3} and left_out == ["planted_count", "planted_feature"]
    with pytest.raises(UnsupportedCombination, match="has no planted_feature, which this run needs set"):
        hf_trainer.version_arguments({"max_steps": 3, "planted_feature": True})


def test_the_quick_starts_model_on_a_token_task_takes_the_loss_kwargs_a_causal_lm_takes():
    """Defaults mode stands evalkit's model in for the page's AutoModelForCausalLM: on a token task its forward takes
    **kwargs (what the Trainer inspects for model_accepts_loss_kwargs) and divides its summed token losses by the
    num_items_in_batch it is passed, as ForCausalLMLoss does; aligned mode and fixed-terms tasks keep the plain
    module (the Trainer then divides by the accumulation count)."""
    import inspect

    from evalkit.tasks.catalog import TokenLoss

    g = torch.Generator().manual_seed(1)
    model = torch.nn.Linear(3, 7)
    x, targets = torch.randn(4, 5, 3, generator=g), torch.randint(0, 7, (4, 5), generator=g)
    targets[0, 2:] = IGNORE_INDEX
    targets[3, 1:] = IGNORE_INDEX

    def job(loss_terms):
        return SimpleNamespace(task=SimpleNamespace(model=model, loss_fn=TokenLoss(), loss_terms=loss_terms),
                               device=torch.device("cpu"))

    def takes_kwargs(module) -> bool:
        parameters = inspect.signature(module.forward).parameters.values()
        return any(p.kind == inspect.Parameter.VAR_KEYWORD for p in parameters)

    quick = hf_trainer.task_module(job(count_tokens), "defaults")
    assert takes_kwargs(quick)
    assert not takes_kwargs(hf_trainer.task_module(job(count_tokens), "aligned"))
    assert not takes_kwargs(hf_trainer.task_module(job(None), "defaults"))
    window = torch.tensor(count_tokens(targets))
    summed = sum(quick(x[i:i + 2], targets[i:i + 2], num_items_in_batch=window)["loss"] for i in (0, 2))
    assert torch.allclose(summed, TokenLoss()(model(x), targets))                    # the window's token mean
    assert torch.equal(quick(x, targets)["loss"], TokenLoss()(model(x), targets))    # no count: its own mean
