"""Workers forked from a warm server (issue 30: `evalkit.worker.warm_server`, `controller/launch/warm_server.py`),
through the real command: a job's fixed cost without its imports, and every promise of a fresh process kept. A sweep's
jobs are forked one after the other from one server; a job that is killed leaves the server and the next job intact; a
job never sees what an earlier one left in its process; threads and the import footprint are recorded as a fresh
interpreter's are."""
from __future__ import annotations

import os

from helpers import PLANTED, job_runs, job_summary, run_evalkit

SMALL = ["task.n_train=256", "task.n_val=64", "train.max_steps=12", "train.val_every=0"]


def test_a_killed_job_leaves_the_server_and_the_next_job_intact_and_no_state_carries_over(workdir):
    # Hydra's order: (kill after step 4, seed 0), (kill, seed 1), (no kill, seed 0), (no kill, seed 1)
    done = run_evalkit(workdir, "trainer._target_=stateful_loop.StatefulAdapter", "trainer.name=stateful",
                       "hardware.worker_start=warm", *SMALL, "faults.kill_after_step=4,0", "seed=0,1",
                       multirun=True, env={"PYTHONPATH": str(PLANTED)})
    _, runs = job_runs(workdir)
    jobs = {(r.data.params["faults.kill_after_step"], r.data.params["seed"]): r for r in runs
            if "faults.kill_after_step" in r.data.params}
    assert len(jobs) == 4, done.stderr[-3000:]
    for seed in ("0", "1"):
        killed, after = jobs[("4", seed)], jobs[("0", seed)]
        assert killed.info.status == "FAILED" and "SIGKILL" in killed.data.tags["evalkit.failure_reason"]
        # trained in a process that had never trained: the planted loop fails a job whose process trained before
        # ("state carried from an earlier job"), and every job before it trained
        assert after.info.status == "FINISHED", after.data.tags.get("evalkit.failure_reason")


def test_warm_and_fresh_workers_record_the_same_threads_and_import_footprint(workdir):
    done = run_evalkit(workdir, "trainer=baseline", "hardware.worker_start=fresh", *SMALL)
    assert done.returncode == 0, done.stderr[-3000:]
    # two jobs of one sweep: the first starts the server (its start-up includes the server's imports), the second
    # is forked from it at once
    done = run_evalkit(workdir, "trainer=baseline", "hardware.worker_start=warm", *SMALL, "seed=0,1", multirun=True)
    assert done.returncode == 0, done.stderr[-3000:]
    client, runs = job_runs(workdir)
    fresh, _, warm = (job_summary(client, r) for r in runs if "seed" in r.data.params)
    assert warm["threads_at_end"] == fresh["threads_at_end"]
    # the footprint of torch and evalkit's modules, measured the same way (VmRSS after the imports)
    assert 0.75 < warm["import_rss_bytes"] / fresh["import_rss_bytes"] < 1.33
    # measured side by side in one test: the forked worker has its modules at once
    assert warm["startup_torch_imported_s"] < fresh["startup_torch_imported_s"] / 3


def test_a_process_shows_the_command_line_and_environment_it_is_given_in_proc():
    """warm_server.show_as: a forked worker shows itself in ps and /proc as a fresh one would (its run dir, its rank),
    in the room its server was started with; what does not fit is left as it was."""
    import subprocess
    import sys

    from evalkit import names

    code = ("import os, sys; from evalkit.worker.warm_server import show_as; "
            "show_as([sys.executable, '-m', 'evalkit.worker', '/runs/7'], {'RANK': '1', 'A': 'b'}); "
            "print(open('/proc/self/cmdline', 'rb').read().rstrip(b'\\0').split(b'\\0')); "
            "print(open('/proc/self/environ', 'rb').read().rstrip(b'\\0').split(b'\\0'))")
    room = "_" * names.PROC_ROOM
    out = subprocess.run([sys.executable, "-c", code, room], env={**os.environ, names.PROC_ROOM_ENV: room},
                         capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0] == repr([sys.executable.encode(), b"-m", b"evalkit.worker", b"/runs/7"])
    assert out[1] == repr([b"RANK=1", b"A=b"])
