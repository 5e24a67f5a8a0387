"""The transformers Trainer adapter's token normalization (issue 33): in aligned mode on a token task its
`compute_loss_func` turns each micro-batch's token mean into the window's token mean (the baseline's), given the
window's token count the Trainer passes as `num_items_in_batch`; a Trainer that cannot take one leaves it and says
so."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("transformers")

from evalkit.adapters import hf_trainer  # noqa: E402
from evalkit.adapters.hf_trainer import HFTrainerAdapter, TokenWindowLoss  # noqa: E402
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


def test_with_loss_kwargs_the_quick_starts_model_on_a_token_task_takes_the_loss_kwargs_a_causal_lm_takes():
    """`trainer.options.loss_kwargs` stands evalkit's model in for the page's AutoModelForCausalLM: on a token task its
    forward takes **kwargs (what the Trainer inspects for model_accepts_loss_kwargs) and divides its summed token
    losses by the num_items_in_batch it is passed, as ForCausalLMLoss does; without the option, in aligned mode and on
    fixed-terms tasks the plain module (the Trainer then divides by the accumulation count: issue 44)."""
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

    quick = hf_trainer.task_module(job(count_tokens), "defaults", loss_kwargs=True)
    assert takes_kwargs(quick)
    assert not takes_kwargs(hf_trainer.task_module(job(count_tokens), "defaults"))
    assert not takes_kwargs(hf_trainer.task_module(job(count_tokens), "aligned", loss_kwargs=True))
    assert not takes_kwargs(hf_trainer.task_module(job(None), "defaults", loss_kwargs=True))
    window = torch.tensor(count_tokens(targets))
    summed = sum(quick(x[i:i + 2], targets[i:i + 2], num_items_in_batch=window)["loss"] for i in (0, 2))
    assert torch.allclose(summed, TokenLoss()(model(x), targets))                    # the window's token mean
    assert torch.equal(quick(x, targets)["loss"], TokenLoss()(model(x), targets))    # no count: its own mean


def test_an_argument_left_out_for_an_older_trainingarguments_is_a_deviation_the_semantic_verdict_shows(monkeypatch):
    """Issue 44: what an older transformers (`trainer.env`) lacks and the adapter leaves out (it asks for nothing) is
    no longer a detail nothing reads: the effective config declares it, naming the argument and the version, and the
    semantic probe's notes (the verdict's report) show it."""
    import dataclasses

    import transformers

    from evalkit.contract.effective import EffectiveConfig
    from evalkit.probes.semantics.judge import _declared_not_observed

    @dataclasses.dataclass
    class OlderTrainingArguments:          # a TrainingArguments without average_tokens_across_devices
        output_dir: str = ""
        max_steps: int = 0
        device = torch.device("cpu")

    class Adapter(HFTrainerAdapter):
        def trainer_class(self):
            return lambda **kwargs: SimpleNamespace(**kwargs)

    monkeypatch.setattr(transformers, "TrainingArguments", OlderTrainingArguments)
    monkeypatch.setattr(transformers, "__version__", "4.45.2")
    monkeypatch.setattr(hf_trainer, "task_module", lambda *args, **kwargs: SimpleNamespace())
    adapter = Adapter(mode="defaults")
    job = SimpleNamespace(task=SimpleNamespace(train_set=None, val_set=None), device=torch.device("cpu"))
    trainer = adapter._trainer(job, {"output_dir": "out", "max_steps": 3, "average_tokens_across_devices": False})
    assert trainer.args == OlderTrainingArguments("out", 3)
    recorded = EffectiveConfig.of(adapter.effective_config().as_json())
    declared = [d for d in recorded.deviations if "average_tokens_across_devices" in d.text]
    assert declared and "transformers 4.45.2" in declared[0].text
    notes = _declared_not_observed([SimpleNamespace(effective=adapter.effective_config().as_json())], [])
    assert any("average_tokens_across_devices" in note and "4.45.2" in note for note in notes)


def test_an_argument_an_older_trainingarguments_lacks_and_the_run_needs_is_refused_with_the_fix(monkeypatch):
    """The refusal names the argument, the installed transformers and how to run it."""
    import transformers

    from evalkit.contract import UnsupportedCombination

    monkeypatch.setattr(transformers, "__version__", "4.45.2")
    with pytest.raises(UnsupportedCombination) as refused:
        hf_trainer.version_arguments({"max_steps": 3, "planted_feature": True})
    message = str(refused.value)
    assert "transformers 4.45.2's TrainingArguments has no planted_feature" in message
    assert "trainer.env" in message and "evalkit-env create transformers==" in message
