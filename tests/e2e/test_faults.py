"""The worker's fault injector (evalkit/worker/faults.py) in a child process: a kill inside `torch.save` leaves half
the bytes where the wrapper wrote them, whether it saves to a path or serializes into memory first and writes the
file after (then the first write of a file under the checkpoint directory, or staged right in the temporary
directory, is cut halfway); other files are never touched. Errors at a step come from public hooks."""
from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import pytest
import torch

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
