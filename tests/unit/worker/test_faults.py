"""The worker's fault injector (evalkit/worker/faults.py) in a child process: a kill inside `torch.save` leaves half
the bytes where the wrapper wrote them, whether it saves to a path or serializes into memory first and writes the
file after (then the first write of a file under the checkpoint directory, or staged right in the temporary
directory, is cut halfway); other files are never touched. Errors at a step come from public hooks."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from evalkit.worker.faults import FaultInjector


def test_oom_and_loss_errors_are_raised_at_their_step_through_hooks_then_removed():
    model, loss_fn = torch.nn.Linear(2, 1), torch.nn.MSELoss()
    step = [0]
    faults = SimpleNamespace(kill_after_step=0, kill_in_save_after_step=0, oom_at_step=2, loss_error_at_step=3,
                             disk_full_at_step=0, slow_forward_s=0)
    injector = FaultInjector(faults, model, loss_fn, lambda: step[0], lambda: None)
    x, y = torch.ones(4, 2), torch.ones(4, 1)
    loss_fn(model(x), y).backward()                      # step 1 trains
    step[0] = 1
    with pytest.raises(torch.OutOfMemoryError, match="injected by evalkit .* step 2"):
        model(x)
    with torch.no_grad():
        model(x)                                         # validation forwards are never faulted
    step[0] = 2
    out = model(x)
    with pytest.raises(RuntimeError, match="error in the loss function .* step 3"):
        loss_fn(out, y)
    injector.remove()
    loss_fn(model(x), y)                                 # removed: nothing raised
    assert torch.save.__module__ == "torch.serialization"


def test_a_slow_forward_sleeps_in_every_training_forward_only(monkeypatch):
    import evalkit.worker.faults as faults_module

    slept = []
    monkeypatch.setattr(faults_module.time, "sleep", slept.append)
    model = torch.nn.Linear(2, 1)
    faults = SimpleNamespace(kill_after_step=0, kill_in_save_after_step=0, oom_at_step=0, loss_error_at_step=0,
                             disk_full_at_step=0, slow_forward_s=0.25)
    injector = FaultInjector(faults, model, torch.nn.MSELoss(), lambda: 0, lambda: None)
    model(torch.ones(1, 2))
    model(torch.ones(1, 2))
    with torch.no_grad():
        model(torch.ones(1, 2))                          # validation: not slowed
    injector.remove()
    model(torch.ones(1, 2))
    assert slept == [0.25, 0.25]


def test_the_load_watch_names_every_checkpoint_loaded_with_weights_only_false(tmp_path):
    import fsspec

    from evalkit.worker.load_watch import LoadWatch

    path = tmp_path / "step=12.ckpt"
    torch.save({"w": torch.ones(2)}, path)
    watch = LoadWatch()
    try:
        with fsspec.open(str(path), "rb") as fh:      # Lightning's way: a file object, weights_only=False
            torch.load(fh, weights_only=False)
        torch.load(path, weights_only=True)
    finally:
        watch.remove()
    assert watch.summary() == {"checkpoint_loads": [{"file": "step=12.ckpt", "weights_only": False},
                                                    {"file": "step=12.ckpt", "weights_only": True}],
                               "unsafe_loads": ["step=12.ckpt"]}
    assert torch.load.__module__ == "torch.serialization"
