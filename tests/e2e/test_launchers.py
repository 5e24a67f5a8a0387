"""Real engines for sweeps: Hydra's joblib launcher runs a sweep's jobs side by side into one store with no run
or point lost and the failures counted (they happen in other processes), and a timed sweep refuses to share the
machine."""
from __future__ import annotations

from helpers import job_runs, run_evalkit

from evalkit import names
from evalkit.cpus import usable_cpus

PARALLEL = ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]


def test_a_joblib_sweep_records_every_job_and_point_and_counts_the_failures_of_other_processes(workdir):
    proc = run_evalkit(workdir, *PARALLEL, "seed=0,1", "faults.loss_error_at_step=0,3", "train.max_steps=10",
                       "task.n_train=128", "task.n_val=32", multirun=True)
    assert proc.returncode == 1 and "evalkit: 2 job(s) failed" in proc.stderr, proc.stderr[-3000:]
    client, runs = job_runs(workdir)
    (parent,) = [r for r in runs if r.data.tags[names.ROLE] == names.ROLE_SWEEP]
    jobs = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert len(jobs) == 4
    assert parent.data.tags[names.JOBS] == "4" and parent.data.tags[names.JOBS_FAILED] == "2"
    assert parent.info.status == "FAILED" and parent.data.metrics["summary/baseline.aligned/jobs_finished"] == 2
    for run in jobs:
        steps = [p.step for p in client.get_metric_history(run.info.run_id, names.TRAIN_LOSS)]
        expected = list(range(1, 11)) if run.info.status == "FINISHED" else [1, 2]
        assert steps == expected, (run.info.run_name, run.info.status, steps)
    assert sorted(r.info.status for r in jobs) == ["FAILED", "FAILED", "FINISHED", "FINISHED"]
    counted = [line for line in proc.stderr.splitlines() if "jobs done" in line]
    assert len(counted) == 4 and any("4/4 jobs done (2 failed)" in line for line in counted), counted
    threads = max(1, usable_cpus() // 2)        # hardware.threads=0: the cores shared by the two jobs at once
    assert {run.data.params["hardware.threads"] for run in jobs} == {str(threads)}
    assert {run.data.tags[names.CALIBER].split("|")[1] for run in jobs} == {f"thr={threads}"}


def test_a_timed_sweep_refuses_to_run_its_jobs_side_by_side(workdir):
    proc = run_evalkit(workdir, *PARALLEL, "probe=performance", "trainer=ignite,fabric", multirun=True)
    assert proc.returncode != 0
    refusal = [line for line in proc.stderr.splitlines() if line.startswith("evalkit: refused: a timed sweep")]
    assert len(refusal) == 1 and "hydra.launcher.n_jobs=1" in refusal[0] and "Traceback" not in proc.stderr
    assert not (workdir / "mlflow.db").exists() or not [r for r in job_runs(workdir)[1]]
