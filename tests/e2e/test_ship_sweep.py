"""A sweep that could not end itself: its parent run stayed RUNNING forever when the store failed at the sweep's
end, or when the sweep's process was killed. Now the sweep says `evalkit-ship <sweep dir>`, and that command
ships what its jobs left and ends the parent with the jobs counted."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from helpers import EVALKIT, SWEEP_WITH_A_JOB_LEFT_WAITING, job_runs, store_uri, wait_for_no_workers, worker_pids

from evalkit import names

SHIP = os.path.join(os.path.dirname(sys.executable), "evalkit-ship")
TINY = ["trainer=baseline", "task.n_train=64", "task.n_val=16", "train.batch_size=8", "train.val_every=0",
        "tracking.flush_interval_s=0.2", "tracking.progress_interval_s=1000", "hydra.sweep.dir=sweep"]
# The sweep runs in a process of its own whose store fails once, on the first call that ends the parent run.
SWEEP_WITH_A_FAILING_END = """
import sys
from evalkit.controller.sweep import callback
from evalkit import cli

end_parent, failed = callback.SweepCallback._end_parent, []

def fails_once(self, status, reason):
    if not failed:
        failed.append(status)
        raise RuntimeError("(sqlite3.OperationalError) database is locked")
    return end_parent(self, status, reason)

callback.SweepCallback._end_parent = fails_once
sys.argv = ["evalkit", "-m", *sys.argv[1:]]
cli.main()
"""



def _env() -> dict:
    return {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "EVALKIT_DEFAULT_TRACKING_URI")}


def _ship(workdir, path) -> subprocess.CompletedProcess:
    return subprocess.run([SHIP, str(path)], cwd=workdir, capture_output=True, text=True, env=_env(), timeout=300)


def _sweep_and_jobs(workdir):
    client, runs = job_runs(workdir)
    (parent,) = [r for r in runs if r.data.tags[names.ROLE] == names.ROLE_SWEEP]
    jobs = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    return client, parent, jobs


def test_a_sweep_whose_store_fails_at_its_end_says_how_and_evalkit_ship_ends_its_run(workdir):
    proc = subprocess.run([sys.executable, "-c", SWEEP_WITH_A_FAILING_END, *TINY, "train.max_steps=6", "seed=0,1",
                           f"tracking.uri={store_uri(workdir)}"],
                          cwd=workdir, capture_output=True, text=True, env=_env(), timeout=600)
    sweep_dir = workdir / "sweep"
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]   # work is left to do
    assert "job(s) failed" not in proc.stderr
    (line,) = [line for line in proc.stderr.splitlines() if "could not be ended" in line]
    assert "(RuntimeError: (sqlite3.OperationalError) database is locked)" in line
    assert line.endswith(f"it stays RUNNING until the store answers: then run: evalkit-ship {sweep_dir}")
    _, parent, jobs = _sweep_and_jobs(workdir)
    assert parent.info.status == "RUNNING" and [j.info.status for j in jobs] == ["FINISHED", "FINISHED"]

    ship = _ship(workdir, sweep_dir)
    assert ship.returncode == 0, ship.stderr[-3000:]
    assert f"parent run {parent.info.run_id} ended FINISHED (2 jobs, 0 failed)" in ship.stdout
    client, parent, jobs = _sweep_and_jobs(workdir)
    assert parent.info.status == "FINISHED" and len(jobs) == 2
    assert parent.data.tags[names.JOBS] == "2" and parent.data.tags[names.JOBS_FAILED] == "0"
    assert "2 jobs in" in parent.data.tags[names.MLFLOW_NOTE]        # the sweep's summary, as it would have written
    (state,) = sweep_dir.glob(".evalkit_sweep_*.json")
    assert json.loads(state.read_text())["ended"] is True

    again = _ship(workdir, sweep_dir)                                 # nothing left to do, nothing done twice
    assert again.returncode == 0 and "ended" not in again.stdout, again.stderr
    assert len(job_runs(workdir)[1]) == 3 and _sweep_and_jobs(workdir)[1].info.status == "FINISHED"


def test_a_job_still_waiting_when_its_sweep_ended_is_shipped_by_evalkit_ship_which_updates_the_counts(workdir):
    proc = subprocess.run([sys.executable, "-c", SWEEP_WITH_A_JOB_LEFT_WAITING, *TINY, "train.max_steps=6",
                           "seed=0,1", f"tracking.uri={store_uri(workdir)}"],
                          cwd=workdir, capture_output=True, text=True, env=_env(), timeout=600)
    sweep_dir = workdir / "sweep"
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    (line,) = [line for line in proc.stderr.splitlines() if "still waits for the store" in line]
    assert line.endswith(f"when it answers, run: evalkit-ship {sweep_dir}"), line
    assert "job(s) failed" not in proc.stderr         # trained; only its recording waits
    assert proc.stderr.rstrip().endswith("evalkit: 1 job(s) not recorded yet: their records wait for the store (the "
                                         "evalkit-ship line above records them)"), proc.stderr[-2000:]
    client, parent, jobs = _sweep_and_jobs(workdir)
    assert parent.info.status == "FAILED" and parent.data.tags[names.JOBS_FAILED] == "1", parent.data.tags
    assert sorted(j.info.status for j in jobs) == ["FINISHED", "RUNNING"]

    ship = _ship(workdir, sweep_dir)
    assert ship.returncode == 0, ship.stderr[-3000:]
    assert f"parent run {parent.info.run_id} ended FINISHED (2 jobs, 0 failed)" in ship.stdout, ship.stdout
    client, parent, jobs = _sweep_and_jobs(workdir)
    assert parent.info.status == "FINISHED" and parent.data.tags[names.JOBS_FAILED] == "0"
    assert parent.data.tags[names.JOBS] == "2" and "2 jobs in" in parent.data.tags[names.MLFLOW_NOTE]
    assert [j.info.status for j in jobs] == ["FINISHED", "FINISHED"]
    for j in jobs:      # every step once, the waiting job's too
        assert [m.step for m in client.get_metric_history(j.info.run_id, names.TRAIN_LOSS)] == list(range(1, 7))
    again = _ship(workdir, sweep_dir)
    assert again.returncode == 0 and "ended" not in again.stdout, again.stderr


def test_a_killed_sweep_is_refused_while_it_runs_then_ended_killed_with_its_jobs_records(workdir):
    """SIGKILL on the sweep's process (no callback runs): its running job and its parent stayed RUNNING."""
    proc = subprocess.Popen([*EVALKIT, "-m", *TINY, "train.max_steps=100000", "seed=0,1",
                             "faults.slow_forward_s=0.02", f"tracking.uri={store_uri(workdir)}"],
                            cwd=workdir, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    spool = workdir / "sweep" / "0" / "spool" / "records_rank0.jsonl"
    deadline = time.monotonic() + 180
    while not (spool.exists() and spool.read_text().count('"kind":"step"') >= 5):
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()[-3000:]
        time.sleep(0.2)

    busy = _ship(workdir, workdir / "sweep")                     # the sweep is alive: nothing is touched
    assert busy.returncode == 1 and f"is still running (pid {proc.pid})" in busy.stderr, busy.stderr
    assert "Traceback" not in busy.stderr

    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    wait_for_no_workers(str(workdir), 30, "a worker outlived its sweep")
    steps = spool.read_text().count('"kind":"step"')
    _, parent, (job,) = _sweep_and_jobs(workdir)
    assert parent.info.status == "RUNNING" and job.info.status == "RUNNING"

    ship = _ship(workdir, workdir / "sweep")
    assert ship.returncode == 0, ship.stderr[-3000:]
    assert f"parent run {parent.info.run_id} ended KILLED (1 jobs, 1 failed)" in ship.stdout
    client, parent, (job,) = _sweep_and_jobs(workdir)
    assert job.info.status == "KILLED"
    assert "controller stopped before its workers ended" in job.data.tags[names.FAILURE_REASON]
    assert [m.step for m in client.get_metric_history(job.info.run_id, names.TRAIN_LOSS)] == \
        list(range(1, steps + 1))
    assert parent.info.status == "KILLED" and parent.data.tags[names.JOBS] == "1"
    assert parent.data.tags[names.FAILURE_REASON] == "the sweep's process stopped before it ended (ended by " \
                                                     "evalkit-ship)"


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as fh:
        return int(fh.read().rsplit(")", 1)[1].split()[1])


def test_a_launcher_that_loses_a_job_process_ends_its_sweep_and_evalkit_ship_records_the_jobs_it_left(workdir):
    """joblib's worker process killed (as the kernel's OOM killer would): the launcher raises, the sweep's parent
    ended FAILED counting no job, and both jobs (loky stops the other worker too) stayed RUNNING forever."""
    proc = subprocess.Popen([*EVALKIT, "-m", *TINY, "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "seed=0,1",
                             "train.max_steps=100000", "faults.slow_forward_s=0.02",
                             f"tracking.uri={store_uri(workdir)}"],
                            cwd=workdir, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    spools = [workdir / "sweep" / str(i) / "spool" / "records_rank0.jsonl" for i in (0, 1)]
    deadline = time.monotonic() + 180
    while not all(s.exists() and s.read_text().count('"kind":"step"') >= 5 for s in spools):
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()[-3000:]
        time.sleep(0.2)
    (worker,) = worker_pids(str(workdir / "sweep" / "0"))
    job_process = _parent(worker)                                        # the loky process running job 0
    if b"evalkit.worker.warm_server" in open(f"/proc/{job_process}/cmdline", "rb").read():
        job_process = _parent(job_process)                               # the worker was forked from a warm server
    os.kill(job_process, signal.SIGKILL)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode != 0
    sweep_dir = workdir / "sweep"
    assert f"ended FAILED; 2 job(s) it left unfinished are recorded, and its counts updated, by: evalkit-ship " \
           f"{sweep_dir}" in stderr, stderr[-3000:]
    _, parent, jobs = _sweep_and_jobs(workdir)
    assert parent.info.status == "FAILED" and parent.data.tags[names.JOBS] == "0"
    assert [j.info.status for j in jobs] == ["RUNNING", "RUNNING"]

    ship = _ship(workdir, sweep_dir)
    assert ship.returncode == 0, ship.stderr[-3000:]
    assert f"parent run {parent.info.run_id} ended FAILED (2 jobs, 2 failed)" in ship.stdout
    client, parent, jobs = _sweep_and_jobs(workdir)
    assert parent.data.tags[names.JOBS] == "2" and parent.data.tags[names.JOBS_FAILED] == "2"
    assert parent.data.tags[names.FAILURE_REASON] == "the launcher stopped on an error before every job ended"
    for job in jobs:
        assert job.info.status == "KILLED", job.data.tags
        spooled = (Path(job.data.tags[names.RUN_DIR]) / "spool" / "records_rank0.jsonl").read_text()
        assert len(client.get_metric_history(job.info.run_id, names.TRAIN_LOSS)) == spooled.count('"kind":"step"')


def test_evalkit_ship_on_a_folder_that_is_neither_a_run_nor_a_sweep_says_so(tmp_path):
    proc = _ship(tmp_path, tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == f"evalkit-ship: {tmp_path} has no job.json: it is not an evalkit run directory " \
                                  "(a job's hydra.run.dir, or a sweep's hydra.sweep.dir)"
