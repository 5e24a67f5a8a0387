"""Shipping does nothing twice (issue 48): `evalkit-ship` on a finished run, an interrupted sweep, a job whose
controller was killed and a sweep recovered after an outage leaves every stored row as the first ship left it (the
rows of MLflow's SQLite tables compared whole), and a run recorded late keeps the times its job had, not the ship's."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

from helpers import EVALKIT, SWEEP_WITH_A_JOB_LEFT_WAITING, job_runs, run_evalkit, store_uri, wait_for_no_workers

from evalkit import names

SHIP = os.path.join(os.path.dirname(sys.executable), "evalkit-ship")
TINY = ["task.n_train=64", "task.n_val=16", "train.batch_size=8", "train.val_every=0", "tracking.flush_interval_s=0.2",
        "tracking.progress_interval_s=1000"]
TABLES = ("runs", "metrics", "latest_metrics", "params", "tags", "experiments")


def _env() -> dict:
    return {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "EVALKIT_DEFAULT_TRACKING_URI")}


def _rows(workdir) -> dict[str, list[tuple]]:
    """Every row of the tables that hold runs, their points, params and tags, in a stable order."""
    with sqlite3.connect(workdir / "mlflow.db") as db:
        return {t: sorted(db.execute(f"SELECT * FROM {t}").fetchall(), key=repr) for t in TABLES}


def _ship(workdir, path) -> subprocess.CompletedProcess:
    return subprocess.run([SHIP, str(path)], cwd=workdir, capture_output=True, text=True, env=_env(), timeout=300)


def _twice(workdir, path) -> tuple[subprocess.CompletedProcess, dict]:
    """Ship `path` twice: the first ship's output, and the rows it left, which the second must not change."""
    first = _ship(workdir, path)
    rows = _rows(workdir)
    second = _ship(workdir, path)
    assert second.returncode == 0 and "Traceback" not in second.stderr, second.stderr[-3000:]
    assert _rows(workdir) == rows, "the second ship changed a stored row"
    return first, rows


def _steps(spool) -> int:
    return spool.read_text().count('"kind":"step"') if spool.exists() else 0


def _wait_for_steps(spool, n: int, proc) -> None:
    deadline = time.monotonic() + 180
    while _steps(spool) < n:
        assert proc.poll() is None and time.monotonic() < deadline, f"fewer than {n} steps in {spool}"
        time.sleep(0.2)


def test_a_finished_run_is_left_exactly_as_it_is(workdir):
    proc = run_evalkit(workdir, "hydra.run.dir=run", "train.max_steps=10", *TINY)
    assert proc.returncode == 0, proc.stderr[-3000:]
    before = _rows(workdir)
    first, _ = _twice(workdir, workdir / "run")
    assert first.returncode == 0 and "has already ended (FINISHED): left as it is" in first.stdout, first.stderr
    assert _rows(workdir) == before
    _, (run,) = job_runs(workdir)
    assert " after " in run.data.tags[names.MLFLOW_NOTE]          # the description keeps how long it took
    perf = [m for m in before["metrics"] if str(m[0]).startswith("perf/")]
    assert perf and len(perf) == len({m[0] for m in perf})         # one point of each perf metric


def test_an_interrupted_sweep_keeps_its_end_times(workdir):
    proc = subprocess.Popen([*EVALKIT, "-m", "seed=0,1", "train.max_steps=100000", *TINY, "hydra.sweep.dir=sweep"],
                            cwd=workdir, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _wait_for_steps(workdir / "sweep" / "0" / "spool" / "records_rank0.jsonl", 10, proc)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr[-3000:]
    before = _rows(workdir)
    time.sleep(1.5)                        # a ship that rewrote the end times would move them by this much
    first, _ = _twice(workdir, workdir / "sweep")
    assert first.returncode == 0, first.stderr[-3000:]
    assert _rows(workdir) == before


def test_a_job_whose_controller_was_killed_is_recorded_once_with_its_own_end(workdir):
    proc = subprocess.Popen([*EVALKIT, "hydra.run.dir=run", "train.max_steps=100000", *TINY], cwd=workdir,
                            env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    spool = workdir / "run" / "spool" / "records_rank0.jsonl"
    _wait_for_steps(spool, 5, proc)
    proc.kill()
    proc.communicate(timeout=60)
    wait_for_no_workers(str(workdir / "run"), 20)
    last_write = max(p.stat().st_mtime for p in (workdir / "run" / "spool").iterdir())
    time.sleep(2)
    first, _ = _twice(workdir, workdir / "run")
    assert "KILLED" in first.stdout, first.stderr[-3000:]
    _, (run,) = job_runs(workdir)
    assert run.info.status == "KILLED"
    assert abs(run.info.end_time / 1000 - last_write) < 0.01     # the spool's last write, not the ship's time


def test_a_sweep_recovered_after_an_outage_keeps_its_jobs_times(workdir):
    proc = subprocess.run([sys.executable, "-c", SWEEP_WITH_A_JOB_LEFT_WAITING, "trainer=baseline", *TINY,
                           "hydra.sweep.dir=sweep", "train.max_steps=6", "seed=0,1",
                           f"tracking.uri={store_uri(workdir)}"],
                          cwd=workdir, capture_output=True, text=True, env=_env(), timeout=600)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    time.sleep(2)
    first, _ = _twice(workdir, workdir / "sweep")
    assert first.returncode == 0 and "ended FINISHED (2 jobs, 0 failed)" in first.stdout, first.stderr[-3000:]
    client, runs = job_runs(workdir)
    jobs = [r for r in runs if r.data.tags.get(names.ROLE) == names.ROLE_JOB]
    assert [j.info.status for j in jobs] == ["FINISHED", "FINISHED"]
    for job in jobs:      # each job's end is when its workers ended, as its controller marked it
        with open(os.path.join(job.data.tags[names.RUN_DIR], "job_phases.json")) as fh:
            marks = json.load(fh)
        assert job.info.end_time == int(marks["workers_ended"] * 1000) or \
            job.info.end_time <= int(marks["run_finished"] * 1000), job.info.run_name
        assert job.info.end_time / 1000 - job.info.start_time / 1000 < 60
