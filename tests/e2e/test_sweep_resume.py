"""Sweeps that can be resumed: a job's fingerprint is its resolved config without the tracking settings, and a
sweep re-run with `sweep.resume=true` keeps the FINISHED runs of the same fingerprint, runs FAILED ones again,
lists what it kept on its parent, and the verdict of the new sweep reads the kept runs with its own."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from helpers import job_runs, run_evalkit, store_uri

from evalkit import names

TINY = ["trainer=baseline", "task.n_train=64", "task.n_val=16", "train.max_steps=8", "train.val_every=4"]


def test_a_resumed_sweep_keeps_finished_jobs_reruns_failed_ones_and_the_verdict_reads_both(workdir):
    first = run_evalkit(workdir, *TINY, "seed=0,1", multirun=True)
    assert first.returncode == 0, first.stderr[-3000:]
    client, runs = job_runs(workdir)
    jobs = {r.data.tags[names.SEED]: r for r in runs if r.data.tags[names.ROLE] == names.ROLE_JOB}
    assert jobs["0"].data.tags[names.FINGERPRINT] != jobs["1"].data.tags[names.FINGERPRINT]
    client.set_terminated(jobs["1"].info.run_id, "FAILED")          # as if seed 1 had failed

    again = run_evalkit(workdir, *TINY, "seed=0,1", "sweep.resume=true", "tracking.flush_interval_s=0.5",
                        multirun=True)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"already FINISHED as run {jobs['0'].info.run_id} (same fingerprint): reused" in again.stderr
    _, runs = job_runs(workdir)
    parents = [r for r in runs if r.data.tags[names.ROLE] == names.ROLE_SWEEP]
    new_parent = parents[-1]
    rerun = [r for r in runs if r.data.tags[names.ROLE] == names.ROLE_JOB
             and r.data.tags.get("mlflow.parentRunId") == new_parent.info.run_id]
    assert [r.data.tags[names.SEED] for r in rerun] == ["1"] and rerun[0].info.status == "FINISHED"
    assert rerun[0].data.tags[names.FINGERPRINT] == jobs["1"].data.tags[names.FINGERPRINT]
    assert new_parent.data.tags[names.JOBS_REUSED] == "1"
    kept = client.download_artifacts(new_parent.info.run_id, names.REUSED_RUNS_ARTIFACT)
    assert json.load(open(kept)) == [jobs["0"].info.run_id]
    assert new_parent.data.metrics["summary/baseline.aligned/jobs_finished"] == 2
    assert "1 reused from earlier sweeps" in new_parent.data.tags[names.MLFLOW_NOTE]

    verdict = subprocess.run([os.path.join(os.path.dirname(sys.executable), "evalkit-verdict"), "--tracking-uri",
                              store_uri(workdir), "--parent-run-id", new_parent.info.run_id, "--no-log"],
                             capture_output=True, text=True, cwd=workdir, timeout=300)
    assert "[2 runs read" in verdict.stderr, verdict.stderr[-2000:]
