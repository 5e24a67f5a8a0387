"""The customization probe's source-cost analyzer: logical lines, wrapper symbols, hooks, wrapper state written
and private touches, measured from planted sources with `ast` alone."""
from __future__ import annotations

import json
import os
import sys
import textwrap

import pytest
from helpers import REPO

from evalkit.probes.customization.source import analyse, cost_for, logical_lines, module_path

ROOT = str(REPO)

PLAIN = '''
"""A plain adapter (planted): its own private state is not the wrapper's."""
import lightning as L


class PlainModule(L.LightningModule):
    def __init__(self, job):
        super().__init__()
        self._job, self._aligned = job, True

    def training_step(self, batch, batch_idx):
        return self._job.loss(batch)


class PlainAdapter:
    def _classes(self):
        return PlainModule


def _helper():
    return 1
'''


def _write(tmp_path, name: str, source: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return str(path)


def _cost(tmp_path, custom: str, packages=("lightning",), plain: str | None = PLAIN):
    plain_path = _write(tmp_path, "plain_adapter.py", plain) if plain is not None else None
    return analyse(_write(tmp_path, "custom_mod.py", custom), plain_path, packages)


def _touches(cost, kind: str | None = None) -> list[str]:
    return [t["name"] for t in cost.private_touches if kind is None or t["kind"] == kind]


# ------------------------------------------------------------------ logical lines
def test_logical_lines_skip_docstrings_comments_and_blank_lines():
    source = textwrap.dedent('''
        """Module docstring,
        over two lines."""
        # a comment

        import os


        def f(x):
            """Function docstring."""
            # another comment
            return x
    ''')
    assert logical_lines(source) == 3      # import, def, return


def test_a_multi_line_call_is_one_line_and_each_statement_counts():
    call = "result = dict(\n    a=1,\n    b=2,\n    c=3,\n)\n"
    assert call.count("\n") == 5 and logical_lines(call) == 1
    assert logical_lines("if x: y\n") == 2
    assert logical_lines("if x:\n    y\nelif z:\n    w\nelse:\n    v\n") == 5   # if, y, elif, w, v
    assert logical_lines("@decorator\n@other(1)\ndef f():\n    pass\n") == 4
    assert logical_lines("class C:\n    '''Doc.'''\n    x = 1\n") == 2
    assert logical_lines("x = 1\n'not a docstring, an expression'\n") == 2


def test_syntax_errors_raise_in_logical_lines_but_leave_a_note_in_analyse(tmp_path):
    with pytest.raises(SyntaxError):
        logical_lines("def f(:\n")
    cost = _cost(tmp_path, "def f(:\n    pass\n")
    assert len(cost.notes) == 1 and "does not parse at line 1" in cost.notes[0]
    assert cost.lines_added == 0 and cost.lines_total_plain is not None
    missing = analyse(str(tmp_path / "nowhere.py"), None, ("lightning",))
    assert "could not be read" in missing.notes[0]


# ------------------------------------------------------------------ private touches
def test_a_wrapper_objects_private_attribute_counts_but_the_plain_adapters_own_does_not(tmp_path):
    cost = _cost(tmp_path, '''
        from plain_adapter import PlainModule


        class Custom(PlainModule):
            def training_step(self, batch, batch_idx):
                loop = self.trainer._fit_loop
                steps = getattr(self.trainer, "_steps_done", 0)
                return self._job.loss(batch) + self._aligned + loop + steps
    ''')
    assert _touches(cost) == ["self.trainer._fit_loop", "self.trainer._steps_done"]
    assert {t["kind"] for t in cost.private_touches} == {"attribute"}
    assert cost.private_touches[0]["line"] == 7


def test_without_the_plain_adapter_its_private_state_is_a_touch(tmp_path):
    custom = "class C:\n    def f(self, other):\n        return other._job\n"
    assert _touches(_cost(tmp_path, custom)) == []
    assert _touches(_cost(tmp_path, custom, plain=None)) == ["other._job"]


def test_a_private_attribute_the_customization_defines_itself_is_not_a_touch(tmp_path):
    cost = _cost(tmp_path, '''
        class Helper:
            def __init__(self):
                self._seen = 0

            def tick(self, trainer):
                self._seen += 1
                return self._seen, trainer._seen
    ''')
    assert _touches(cost) == []


def test_internal_imports_count_and_the_plain_adapters_private_names_do_not(tmp_path):
    cost = _cost(tmp_path, '''
        import os._private_mod
        from lightning.pytorch.trainer.connectors._x import y
        from transformers.trainer import _is_peft_model
        from plain_adapter import _helper
        from ._siblings import z
        from __future__ import annotations
    ''')
    assert _touches(cost, "import") == ["os._private_mod", "lightning.pytorch.trainer.connectors._x.y",
                                        "transformers.trainer._is_peft_model"]


def test_monkeypatches_count_by_assignment_and_by_setattr(tmp_path):
    cost = _cost(tmp_path, '''
        import ignite.engine
        import lightning as L
        import transformers
        from transformers import Trainer


        def f(self, model, inputs):
            return 0


        transformers.Trainer.compute_loss = f
        setattr(ignite.engine.Engine, "x", f)
        L.Trainer._run = f
        Trainer.training_step = f


        class Stopper:
            def stop(self, trainer, control):
                trainer.should_stop = True
                control.should_training_stop = True
                self.stopped = True
    ''', packages=("transformers", "ignite", "lightning"))
    assert _touches(cost, "monkeypatch") == ["transformers.Trainer.compute_loss", "ignite.engine.Engine.x",
                                             "lightning.Trainer._run", "transformers.Trainer.training_step"]
    assert _touches(cost, "attribute") == []    # L.Trainer._run is a monkeypatch, counted once
    assert "trainer.should_stop" in cost.attributes_set and "control.should_training_stop" in cost.attributes_set
    assert not any(a.startswith("self.") for a in cost.attributes_set)


def test_a_wrapper_private_method_overridden_counts_a_helper_the_module_calls_does_not(tmp_path):
    cost = _cost(tmp_path, '''
        from transformers import Trainer


        class Custom(Trainer):
            def _inner_training_loop(self, *args, **kwargs):
                return self._norm()

            def _norm(self):
                return 1.0
    ''', packages=("transformers",))
    assert _touches(cost, "override") == ["Custom._inner_training_loop"]


# ------------------------------------------------------------------ wrapper symbols and hooks
def test_wrapper_symbols_resolve_through_aliases_and_imports(tmp_path):
    cost = _cost(tmp_path, '''
        import lightning as L
        import torch
        from lightning.pytorch import Callback as Cb
        from lightning.pytorch.callbacks import ModelCheckpoint


        class Stop(Cb):
            pass


        def build():
            ckpt = L.pytorch.callbacks.ModelCheckpoint(every_n_train_steps=1)
            return L.Trainer(callbacks=[ckpt]), torch.zeros(1), L
    ''')
    assert cost.wrapper_symbols == ["lightning", "lightning.Trainer", "lightning.pytorch.Callback",
                                    "lightning.pytorch.callbacks.ModelCheckpoint"]


def test_hooks_overridden_are_found_with_their_base(tmp_path):
    cost = _cost(tmp_path, '''
        import lightning as L
        from plain_adapter import PlainAdapter, PlainModule


        class Mixin:
            def not_a_hook(self):
                pass


        class CustomModule(Mixin, PlainModule):
            def training_step(self, batch, batch_idx):
                return 0


        class Recorder(L.Callback):
            def __init__(self):
                self.values = []

            def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
                self.values.append(trainer.global_step)


        class LaterRecorder(Recorder):
            def on_train_end(self, trainer, pl_module):
                pass


        class CustomAdapter(PlainAdapter):
            def _classes(self):
                return CustomModule
    ''')
    hooks = {(h["class"], h["name"]): h["base"] for h in cost.hooks_overridden}
    assert hooks == {("CustomModule", "training_step"): "plain_adapter.PlainModule",
                     ("Recorder", "on_train_batch_end"): "lightning.Callback",
                     ("LaterRecorder", "on_train_end"): "lightning.Callback",
                     ("CustomAdapter", "_classes"): "plain_adapter.PlainAdapter"}
    assert _touches(cost) == []     # `_classes` is the plain adapter's own method
    json.dumps(cost.as_dict())


def test_a_class_built_on_the_adapters_factory_is_a_hook_class(tmp_path):
    cost = _cost(tmp_path, '''
        from plain_adapter import PlainAdapter


        class CustomAdapter(PlainAdapter):
            def _classes(self):
                class L1Module(super()._classes()):
                    def training_step(self, batch, batch_idx):
                        return 0

                    def _log_grad_norm(self):
                        return 1

                return L1Module

            def other(self):
                class Again(self._classes()):
                    def validation_step(self, batch, batch_idx):
                        return 0

                class NotAHook(dict(a=1).__class__):
                    def training_step(self):
                        return 0

                return Again, NotAHook
    ''')
    hooks = {(h["class"], h["name"]): h["base"] for h in cost.hooks_overridden}
    assert hooks == {("CustomAdapter", "_classes"): "plain_adapter.PlainAdapter",
                     ("CustomAdapter", "other"): "plain_adapter.PlainAdapter",
                     ("L1Module", "training_step"): "super()._classes()",
                     ("L1Module", "_log_grad_norm"): "super()._classes()",
                     ("Again", "validation_step"): "self._classes()"}
    assert _touches(cost, "override") == ["L1Module._log_grad_norm"]


# ------------------------------------------------------------------ module names and real adapters
def test_cost_for_finds_the_module_without_importing_it(tmp_path, monkeypatch):
    package = tmp_path / "planted_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "custom.py").write_text("raise RuntimeError('imported')\nimport lightning as L\nx = L.Trainer\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    cost = cost_for("planted_pkg.custom", None, ("lightning",))
    assert cost.wrapper_symbols == ["lightning.Trainer"] and cost.lines_added == 3
    assert "planted_pkg.custom" not in sys.modules
    with pytest.raises(ValueError, match="not a class path"):
        module_path("planted_pkg.custom.Custom")
    with pytest.raises(ValueError, match="cannot be located"):
        module_path("planted_pkg.nowhere")
    monkeypatch.delitem(sys.modules, "planted_pkg", raising=False)


def test_the_real_plain_adapters_are_analysed():
    lightning = analyse(os.path.join(ROOT, "adapters", "lightning_trainer.py"), None, ("lightning",))
    assert lightning.notes == [] and lightning.lines_added > 50
    assert {"name": "training_step", "base": "lightning.LightningModule"}.items() <= \
        next(h for h in lightning.hooks_overridden if h["name"] == "training_step").items()
    assert "lightning.Trainer" in lightning.wrapper_symbols
    baseline = cost_for("evalkit.adapters.custom.baseline_loss", "evalkit.adapters.baseline", ())
    assert baseline.notes == [] and baseline.private_touches == []
    assert [h["name"] for h in baseline.hooks_overridden] == ["training_loss"]
    assert baseline.lines_added < baseline.lines_total_plain
    plain = analyse(os.path.join(ROOT, "adapters", "baseline.py"), None, ())
    assert any(p.endswith(os.path.join("evalkit", "contract", "adapter.py")) for p in plain.own_sources)
    assert "self._effective" not in _touches(plain)     # WrapperAdapter's (evalkit.contract), the project's own


@pytest.mark.parametrize(("module", "plain", "packages", "hooks"), [
    ("lightning_loss", "lightning_trainer", ("lightning",), {"module_class", "training_step"}),
    ("lightning_callback", "lightning_trainer", ("lightning",), {"callbacks", "on_train_start", "on_train_batch_end"}),
    ("hf_trainer_loss", "hf_trainer", ("transformers",), {"trainer_class", "compute_loss"}),
    ("hf_trainer_callback", "hf_trainer", ("transformers",), {"callbacks", "on_step_end"}),
    ("ignite_callback", "ignite_engine", ("ignite",), {"attach_handlers"}),
    ("fabric_callback", "fabric", ("lightning",), {"callbacks"}),
])
def test_the_bundled_customizations_show_the_hooks_they_use(module, plain, packages, hooks):
    cost = cost_for(f"evalkit.adapters.custom.{module}", f"evalkit.adapters.{plain}", packages)
    assert cost.notes == [] and cost.private_touches == []
    assert {h["name"] for h in cost.hooks_overridden} == hooks
