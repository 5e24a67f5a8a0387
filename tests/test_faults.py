"""The worker's fault injector (evalkit/worker/faults.py) in a child process: a kill inside `torch.save` leaves half
the bytes where the wrapper wrote them, whether it saves to a path or serializes into memory first and writes the
file after (then the first write of a file under the checkpoint directory, or staged right in the temporary
directory, is cut halfway); other files are never touched. Errors at a step come from public hooks."""
from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest
import torch

from evalkit.worker.faults import FaultInjector

CHILD = textwrap.dedent("""
    import io, os, sys, tempfile
    from types import SimpleNamespace
    import torch
    from evalkit.worker.faults import FaultInjector
    ckpt, how = sys.argv[1], sys.argv[2]
    faults = SimpleNamespace(kill_after_step=0, kill_in_save_after_step=3, oom_at_step=0, loss_error_at_step=0,
                             disk_full_at_step=0, slow_forward_s=0)
    step = [3]
    FaultInjector(faults, torch.nn.Linear(2, 2), torch.nn.MSELoss(), lambda: step[0], lambda: None, ckpt)
    state = {"w": torch.arange(4096.0)}
    if how == "path":
        torch.save(state, os.path.join(ckpt, "step_3.pt"))
    else:
        buffer = io.BytesIO()
        torch.save(state, buffer)                 # into memory: nothing killed yet
        with open(os.path.join(ckpt, "..", "unrelated.log"), "w") as fh:   # not a checkpoint's file
            fh.write("kept")
        target = os.path.join(ckpt, "step_3.ckpt") if how == "memory" else tempfile.mkstemp()[1]
        print(target, flush=True)
        with open(target, "wb") as fh:
            fh.write(buffer.getvalue())
    print("survived", flush=True)
""")


def full_size() -> int:
    import io
    buffer = io.BytesIO()
    torch.save({"w": torch.arange(4096.0)}, buffer)
    return len(buffer.getvalue())


@pytest.mark.e2e                       # a child process per case
@pytest.mark.parametrize("how", ["path", "memory", "staged"])
def test_a_kill_inside_a_checkpoint_write_leaves_half_the_bytes(tmp_path, how):
    ckpt = tmp_path / "checkpoints"
    ckpt.mkdir()
    proc = subprocess.run([sys.executable, "-c", CHILD, str(ckpt), how], capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert "survived" not in proc.stdout and "SIGKILL halfway through" in proc.stderr
    target = ckpt / "step_3.pt" if how == "path" else __import__("pathlib").Path(proc.stdout.split()[0])
    assert target.stat().st_size == full_size() // 2
    if how != "path":
        assert (tmp_path / "unrelated.log").read_text() == "kept"
    if how == "staged":
        target.unlink()


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
