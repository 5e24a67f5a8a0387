"""`trainer.options` is a schema (issue 48): a key the adapter does not read is refused at compose time, with the
nearest known key, whichever wrapper it is; the adapter refuses the same when built. The keys are read from the
adapters' source (no wrapper, no torch imported by the check), and that reading agrees with the imported classes."""
from __future__ import annotations

import importlib
import sys
import textwrap

import pytest
from helpers import compose_config

from evalkit.config import register_configs, validate
from evalkit.contract.options import declared_in, option_names, option_problems, unknown_options
from evalkit.trainers import bundled_trainers

register_configs()


def problems(*overrides: str) -> list[str]:
    return validate(compose_config(*overrides))


@pytest.mark.parametrize("trainer", ["baseline", "ignite", "accelerate", "hf_trainer", "lightning", "fabric",
                                     "poutyne"])
def test_a_misspelled_option_is_refused_at_compose_time_whichever_the_wrapper(trainer):
    found = problems(f"trainer={trainer}", "+trainer.options.gradient_acumulation=4", "train.max_steps=5")
    assert len(found) == 1, found
    assert found[0].startswith("trainer.options.gradient_acumulation is not an option of ")
    assert "it would be ignored" in found[0] and "remove it" in found[0]


def test_the_nearest_known_option_is_offered():
    (found,) = problems("trainer=hf_trainer", "+trainer.options.loss_kwarg=true")
    assert found == ("trainer.options.loss_kwarg is not an option of HFTrainerAdapter (it would be ignored): "
                     "did you mean trainer.options.loss_kwargs?")
    assert problems("trainer=hf_trainer", "+trainer.options.loss_kwargs=true") == []


def test_without_options_nothing_is_said():
    for trainer in bundled_trainers():
        assert option_problems(compose_config(f"trainer={trainer}").trainer) == [], trainer


def test_the_source_reading_agrees_with_the_imported_classes():
    """Read without importing (the controller's way), then imported (the worker's): the same keys, for every
    bundled adapter and each customization (a mixin's key joins its adapter's)."""
    targets = [trainer._target_ for trainer in bundled_trainers().values()]
    targets += ["evalkit.adapters.custom.ignite_loss.IgniteCustomLoss",
                "evalkit.adapters.custom.lightning_callback.LightningStopCallback"]
    for target in targets:
        module, _, name = target.rpartition(".")
        saved = sys.modules.pop(module, None)
        try:
            from_source = option_names(target)
        finally:
            if saved is not None:
                sys.modules[module] = saved
        cls = getattr(importlib.import_module(module), name)
        assert from_source == declared_in(cls.__mro__), target
        assert from_source is not None, target
    assert option_names("evalkit.adapters.custom.ignite_loss.IgniteCustomLoss") == {"l1_weight"}
    assert option_names("evalkit.adapters.hf_trainer.HFTrainerAdapter") == {"loss_kwargs"}


def test_the_adapter_refuses_an_unknown_option_when_built():
    from evalkit.adapters.custom.ignite_loss import IgniteCustomLoss
    from evalkit.adapters.ignite_engine import IgniteAdapter

    with pytest.raises(ValueError, match="trainer.options.gradient_acumulation is not an option of IgniteAdapter"):
        IgniteAdapter(options={"gradient_acumulation": 4})
    assert IgniteCustomLoss(options={"l1_weight": 0.1}).l1_weight == 0.1


def test_a_class_that_declares_nothing_is_not_checked(tmp_path, monkeypatch):
    """A third party's adapter may read any key: with no `option_names` in its chain nothing is refused."""
    (tmp_path / "theirs_opts.py").write_text(textwrap.dedent("""
        class Theirs:
            def fit(self, job): ...
            def effective_config(self): ...

        class Declared(Theirs):
            option_names = ("depth",)
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    assert option_names("theirs_opts.Theirs") is None
    assert unknown_options(["anything"], option_names("theirs_opts.Theirs"), "Theirs") == []
    assert option_names("theirs_opts.Declared") == {"depth"}
    assert "theirs_opts" not in sys.modules        # read from source: nothing imported
    assert option_names("nowhere_at_all.Adapter") is None
