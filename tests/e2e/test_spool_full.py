"""A full disk while the spool is written: the refused write is undone (no half record is ever read), the
worker fails with one line naming the spool's folder, and every record written before it is shipped."""
from __future__ import annotations

import pytest
from helpers import job_runs, read_records, run_evalkit

from evalkit import names


def test_a_job_whose_disk_fills_fails_in_one_line_naming_the_spool_and_ships_every_whole_step(workdir):
    proc = run_evalkit(workdir, "task.n_train=128", "task.n_val=32", "train.max_steps=10", "train.val_every=5",
                       "faults.disk_full_at_step=7")
    assert proc.returncode == 1
    client, (run,) = job_runs(workdir)
    reason = run.data.tags[names.FAILURE_REASON]
    assert run.info.status == "FAILED" and "No space left on device" in reason and "/spool" in reason, reason
    failed = [line for line in proc.stderr.splitlines() if line.startswith("evalkit: run ")]
    assert len(failed) == 1 and "cannot write records to the spool" in failed[0], proc.stderr[-3000:]
    steps = [int(r["step"]) for r in read_records(client, run.info.run_id)]
    assert steps == list(range(1, 7))                     # steps 1..6 whole; step 7's half record never shipped
    assert [p.step for p in client.get_metric_history(run.info.run_id, names.TRAIN_LOSS)] == list(range(1, 7))
    assert "Traceback" not in proc.stderr.split("evalkit: run ")[-1]


@pytest.fixture
def tiny_disk(tmp_path):
    """A 96 KiB tmpfs: a real device that fills (root's `mount`; skipped, saying why, where it is refused)."""
    import subprocess

    mount = tmp_path / "tiny"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96k", "tmpfs", str(mount)], capture_output=True,
                          text=True)
    if made.returncode:
        pytest.skip(f"REAL FULL-DISK TEST NOT RUN: cannot mount a small tmpfs here ({made.stderr.strip()}); the "
                    "injected one above still runs")
    yield mount
    subprocess.run(["umount", str(mount)], check=False)


def test_a_really_full_disk_fails_the_job_in_one_line_and_every_whole_step_is_recorded(workdir, tiny_disk):
    proc = run_evalkit(workdir, f"hydra.run.dir={tiny_disk}", "task.n_train=256", "task.n_val=32",
                       "train.max_steps=400", "train.val_every=100")
    assert proc.returncode == 1
    client, (run,) = job_runs(workdir)
    reason = run.data.tags[names.FAILURE_REASON]
    assert run.info.status == "FAILED" and f"{tiny_disk}/spool: No space left on device" in reason, reason
    assert "Traceback" not in proc.stderr and sum(line.startswith("evalkit: run ") for line in
                                                  proc.stderr.splitlines()) == 1, proc.stderr[-3000:]
    steps = [p.step for p in client.get_metric_history(run.info.run_id, names.TRAIN_LOSS)]
    assert 0 < len(steps) < 400 and steps == list(range(1, len(steps) + 1))
    assert [int(r["step"]) for r in read_records(client, run.info.run_id)] == steps
    assert f"every step up to {steps[-1]} is recorded" in reason
