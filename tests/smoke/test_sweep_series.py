"""Several sweeps in one process (`evalkit.cli.run_sweep`, what `evalkit-eval` runs; issue 30): the warm server
one sweep started serves the next, and each sweep keeps its own parent run, sweep directory and exit code."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from helpers import job_runs, job_summary

from evalkit import names
from evalkit.controller.tracking import DEFAULT_URI_ENV

SMALL = ["task.n_train=256", "task.n_val=64", "train.max_steps=12", "train.val_every=0"]
SERIES = """
import json, sys
from evalkit.cli import run_sweep
codes = [run_sweep(json.loads(arg)) for arg in sys.argv[1:]]
print("CODES " + json.dumps(codes))
"""


def test_sweeps_in_one_process_share_the_warm_server_and_report_their_own_failures(workdir):
    common = ["trainer=baseline", "hardware.worker_start=warm", *SMALL, "tracking.progress_interval_s=1000"]
    first = [*common, "seed=0", "faults.kill_after_step=0,4"]   # its second job is killed: exit 1
    second = [*common, "seed=1"]
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", DEFAULT_URI_ENV)}
    done = subprocess.run([sys.executable, "-c", SERIES, json.dumps(first), json.dumps(second)], cwd=workdir,
                          capture_output=True, text=True, timeout=300, env=env)
    codes = [json.loads(line[6:]) for line in done.stdout.splitlines() if line.startswith("CODES ")]
    assert codes == [[1, 0]], done.stderr[-3000:]

    client, runs = job_runs(workdir)
    parents = [r for r in runs if r.data.tags.get(names.ROLE) == names.ROLE_SWEEP]
    jobs = {(r.data.params["seed"], r.data.params["faults.kill_after_step"]): r for r in runs
            if r.data.tags.get(names.ROLE) == names.ROLE_JOB}
    assert len(parents) == 2 and len(jobs) == 3
    # each sweep its own parent, its jobs under it, its own outcome
    by_parent = {p.info.run_id: p for p in parents}
    sweep_of = {key: by_parent[run.data.tags["mlflow.parentRunId"]] for key, run in jobs.items()}
    assert sweep_of[("0", "0")] is sweep_of[("0", "4")] is not sweep_of[("1", "0")]
    assert jobs[("0", "4")].info.status == "FAILED" and jobs[("1", "0")].info.status == "FINISHED"
    assert sweep_of[("1", "0")].info.status == "FINISHED"
    # the second sweep's job was forked from the server the first sweep started: its modules were there at once
    started, reused = job_summary(client, jobs[("0", "0")]), job_summary(client, jobs[("1", "0")])
    assert reused["startup_torch_imported_s"] < started["startup_torch_imported_s"] / 3
