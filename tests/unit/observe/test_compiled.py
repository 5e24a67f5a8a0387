"""What observe/compiled.py records of torch.compile, and that evalkit's own hooks stay out of the compiled graph:
a model hooked as the observer hooks it compiles with no graph break and no recompilation across training steps
(traced, a hook that grows a list every step recompiled the graph each step), and a break or recompilation is
charged to evalkit only when it is evalkit's."""
from __future__ import annotations

import logging
import os

import torch

from evalkit.observe import compiled
from evalkit.observe.hooks import Hooks, untraced
from evalkit.tasks.catalog import MLP


def _message(name: str, text: str) -> logging.LogRecord:
    return logging.LogRecord(name, logging.DEBUG, __file__, 1, text, None, None)


def test_a_break_at_an_untraced_hook_is_evalkits_and_one_in_the_wrappers_code_is_the_wrappers():
    def on_forward(module, args, kwargs, out):
        return None

    untraced(on_forward)
    ours = ("Graph break (user stack suppressed due to duplicate graph break) in user code at torch/nn/modules/"
            f"module.py:1811\n  Explanation: Skip calling function `<function {on_forward.__qualname__} at 0x7f>`")
    theirs = ("Graph break in user code at site-packages/lightning/pytorch/core/module.py:531\n  Explanation: Skip "
              "inlining function <function _ResultCollection.log at 0x7fb>\nUser code traceback:\n"
              "  File \"src/evalkit/worker/run.py\", line 203, in _run")   # every rank's stack runs through evalkit
    assert compiled.origin(ours) == "evalkit"
    assert compiled.origin(theirs) == "wrapper"
    assert compiled.origin("Recompiling function forward in src/evalkit/observe/observer.py:140") == "evalkit"


def test_the_watch_keeps_each_break_and_recompilation_torch_logs_and_nothing_else(tmp_path):
    watch = compiled.CompileWatch(str(tmp_path))
    try:
        log = logging.getLogger("torch._dynamo")
        log.handlers[-1].handle(_message("torch._dynamo.symbolic_convert.__graph_breaks", "Graph break in user code"))
        log.handlers[-1].handle(_message("torch._dynamo.guards.__recompiles", "Recompiling function f in a.py:1"))
        log.handlers[-1].handle(_message("torch._dynamo.eval_frame", "something else"))
        summary = watch.summary()
    finally:
        watch.close()
    assert [e["message"] for e in summary["graph_breaks"]] == ["Graph break in user code"]
    assert [e["message"] for e in summary["recompiles"]] == ["Recompiling function f in a.py:1"]
    assert summary["cache_dir"] == str(tmp_path / "inductor")
    assert "TORCHINDUCTOR_CACHE_DIR" not in os.environ or os.environ["TORCHINDUCTOR_CACHE_DIR"] != summary["cache_dir"]


def _train(net: torch.nn.Module, params, steps: int = 4) -> None:
    optimizer = torch.optim.SGD(params, lr=0.1)
    for _ in range(steps):
        torch.nn.functional.mse_loss(net(torch.randn(4, 8)), torch.randn(4, 1)).backward()
        optimizer.step()
        optimizer.zero_grad()


def test_a_model_hooked_as_the_observer_hooks_it_compiles_whole_and_never_recompiles_while_training(tmp_path):
    """Dynamo's own behaviour is what matters here, so the test compiles with the `eager` backend (no inductor
    codegen: a second instead of 15); the first model is hooked plainly and shows what the untraced hooks avoid."""
    torch.manual_seed(0)
    seen: list = []

    def pre(module, args, kwargs):
        seen.append(args[0].numpy().view("V4").shape)     # reads the batch's bytes: fails to trace

    def post(module, args, kwargs, out):
        seen.append(out.shape)                             # a list that grows every step: recompiles when traced

    plain = MLP(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 1))
    plain.register_forward_hook(post, with_kwargs=True)
    watch = compiled.CompileWatch(str(tmp_path))
    try:
        _train(torch.compile(torch.nn.Sequential(plain), backend="eager"), plain.parameters())
        traced = watch.summary()
    finally:
        watch.close()
    assert traced["recompiles"], "a hook traced into the graph recompiles it as its list grows"

    torch._dynamo.reset()
    seen.clear()
    model = MLP(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 1))
    hooks = Hooks(model, model[0], torch.nn.MSELoss(), on_compute_layer=None, on_forward_pre=pre,
                  on_forward=post, on_loss=None, on_step_pre=None, on_step_post=lambda *a: None,
                  on_scaler_update=lambda scaler: None)
    watch = compiled.CompileWatch(str(tmp_path))
    try:
        _train(torch.compile(model, backend="eager"), model.parameters())
        summary = watch.summary()
    finally:
        watch.close()
        hooks.remove()
    assert len(seen) == 8                                   # both hooks ran on every step, as Python
    assert summary["graphs"] == 1 and summary["frames_ok"] >= 1
    assert summary["graph_breaks"] == [] and summary["recompiles"] == []
    assert summary["compile_s"] > 0 and summary["cache_dir"] == str(tmp_path / "inductor")
