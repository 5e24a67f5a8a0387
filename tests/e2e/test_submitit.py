"""Sweeps through Hydra's submitit launcher: `submitit_local` runs a real sweep here (each job in a process of
its own, whose output submitit sends to files), and `evalkit_slurm` is composed and turned into the sbatch script
it would submit, with a stand-in `sbatch` (no SLURM needed, nothing submitted)."""
from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest
from helpers import job_runs, run_evalkit, store_uri

from evalkit import names
from evalkit.config import register_configs

pytest.importorskip("hydra_plugins.hydra_submitit_launcher",
                    reason="the submitit extra is not installed: pip install -e '.[submitit]'")
register_configs()

LOCAL = ["hydra/launcher=submitit_local"]
# The jobs start without the sweep's variables, as on a cluster node the launch's environment does not reach: they
# must take the sweep's parent run, id and store from the callback that submitit pickled for them.
STRIPPED = '+hydra.launcher.setup=["unset EVALKIT_PARENT_RUN_ID EVALKIT_SWEEP_ID EVALKIT_DEFAULT_TRACKING_URI"]'
SMALL = ["train.max_steps=10", "task.n_train=128", "task.n_val=32", "hardware.threads=1",
         "tracking.system_metrics_interval_s=0"]
SLURM = ["hydra/launcher=evalkit_slurm", "hydra.launcher.partition=gpu", "hydra.launcher.gpus_per_node=4",
         "hydra.launcher.timeout_min=120"]
SECRET = "s3cret-not-in-any-file"


@pytest.fixture(scope="module")
def local_sweep(tmp_path_factory):
    """One submitit_local sweep of two jobs side by side: the second fails at optimizer step 3."""
    workdir = tmp_path_factory.mktemp("submitit")
    proc = run_evalkit(workdir, *LOCAL, STRIPPED, "seed=0", "faults.loss_error_at_step=0,3", *SMALL, multirun=True,
                       timeout=300)
    client, runs = job_runs(workdir)
    (parent,) = [r for r in runs if r.data.tags[names.ROLE] == names.ROLE_SWEEP]
    return proc, client, parent, runs


def test_a_submitit_local_sweep_records_every_job_and_point_and_counts_its_failure(local_sweep):
    proc, client, parent, runs = local_sweep
    assert proc.returncode == 1 and "evalkit: 1 job(s) failed" in proc.stderr, proc.stderr[-3000:]
    jobs = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert len(jobs) == len(runs) - 1 == 2, [(r.info.run_name, r.data.tags.get("mlflow.parentRunId")) for r in runs]
    assert {r.data.tags[names.SWEEP_ID] for r in jobs} == {parent.data.tags[names.SWEEP_ID]}
    assert parent.data.tags[names.JOBS] == "2" and parent.data.tags[names.JOBS_FAILED] == "1"
    assert parent.info.status == "FAILED"
    assert sorted(r.info.status for r in jobs) == ["FAILED", "FINISHED"]
    for run in jobs:
        steps = [p.step for p in client.get_metric_history(run.info.run_id, names.TRAIN_LOSS)]
        assert steps == (list(range(1, 11)) if run.info.status == "FINISHED" else [1, 2]), (run.info.status, steps)
    # Both jobs ran in the sweep's own directory (their processes compose its name again: same name).
    sweep_dir = Path(parent.data.tags[names.SWEEP_DIR])
    assert (sweep_dir / "0" / "job.json").is_file() and (sweep_dir / "1" / "job.json").is_file()
    assert len(list(sweep_dir.parent.iterdir())) == 1, list(sweep_dir.parent.iterdir())


def test_a_failed_submitit_job_is_reported_by_the_sweep_with_its_reason_and_its_log(local_sweep):
    proc, _, parent, _ = local_sweep
    sweep_dir = Path(parent.data.tags[names.SWEEP_DIR])
    assert f"its jobs run through submitit; each job's output (progress, errors) goes to {sweep_dir}/.submitit/" \
        in proc.stderr
    (said,) = [line for line in proc.stderr.splitlines() if line.startswith("evalkit: job ")]
    found = re.fullmatch(r"evalkit: job 2/2 \((.*)\) failed: (.*); its output: (.*)", said)
    assert found, said
    overrides, reason, log = found.groups()
    assert "faults.loss_error_at_step=3" in overrides
    assert reason == "RuntimeError: error in the loss function (injected by evalkit at optimizer step 3)"
    log = Path(log)
    assert log.is_file() and log.parent.parent == sweep_dir / ".submitit", log
    assert f"[evalkit] job 2/2: baseline mlp_regression seed=0: FAILED ({reason})" in log.read_text()
    assert re.search(r"\[evalkit\] sweep \S+: 2/2 jobs done \(1 failed\) in \d+ s$", proc.stderr, re.M), \
        proc.stderr[-2000:]
    # Every job's progress says which job of the sweep it is, in the job's own log.
    logs = "".join(p.read_text() for p in (sweep_dir / ".submitit").glob("*/*_log.err"))
    assert "[evalkit] job 1/2: baseline mlp_regression seed=0: FINISHED" in logs


def test_a_timed_sweep_refuses_submitit_local_which_starts_every_job_at_once(workdir):
    proc = run_evalkit(workdir, *LOCAL, "probe=performance", "trainer=ignite,fabric", multirun=True)
    assert proc.returncode == 2, proc.stderr[-2000:]
    refusal = [line for line in proc.stderr.splitlines() if line.startswith("evalkit: refused: a timed sweep")]
    assert len(refusal) == 1 and "hydra/launcher=submitit_local (2 jobs at once)" in refusal[0], proc.stderr
    assert not (workdir / "mlflow.db").exists()


def test_a_slurm_sweep_without_a_partition_is_refused_before_anything_is_recorded(workdir):
    proc = run_evalkit(workdir, "hydra/launcher=evalkit_slurm", "seed=0,1", multirun=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "evalkit: refused: hydra/launcher=evalkit_slurm needs hydra.launcher.partition=<value> on the command " \
           "line" in proc.stderr
    assert not (workdir / "mlflow.db").exists() and not (workdir / "multirun").exists()


def _stand_ins(folder: Path, record: Path) -> Path:
    """`sbatch` that keeps the script it is given and refuses it; `srun`, only to be found."""
    folder.mkdir()
    for name, body in (("sbatch", f'cp "$1" {record}\necho "sbatch: error: a stand-in submits nothing" >&2\n'
                                  "exit 1\n"), ("srun", "exit 1\n")):
        path = folder / name
        path.write_text("#!/bin/sh\n" + body)
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return folder


def test_a_slurm_sweep_submits_one_array_with_the_settings_given_and_no_credentials(workdir):
    record = workdir / "submitted.sh"
    stand_ins = _stand_ins(workdir / "bin", record)
    env = {"PATH": f"{stand_ins}{os.pathsep}{os.environ['PATH']}", "MLFLOW_TRACKING_USERNAME": "someone",
           "MLFLOW_TRACKING_PASSWORD": SECRET}
    proc = run_evalkit(workdir, *SLURM, "seed=0,1", multirun=True, env=env)
    script = record.read_text()
    for flag in ("--partition=gpu", "--gpus-per-node=4", "--time=120", "--ntasks-per-node=1", "--nodes=1",
                 "--cpus-per-task=8", "--mem=32GB", "--export=ALL", "--array=0-1%2"):
        assert f"#SBATCH {flag}\n" in script, (flag, script)
    assert SECRET not in script and "MLFLOW" not in script
    # The submission failed: the sweep says so and its parent run ends FAILED instead of staying RUNNING.
    assert proc.returncode == 1 and "a stand-in submits nothing" in proc.stderr, proc.stderr[-3000:]
    assert re.search(r"evalkit: the launcher stopped on the error above; sweep run \w+ ended FAILED", proc.stderr)
    client, runs = job_runs(workdir)
    (parent,) = runs
    assert parent.data.tags[names.ROLE] == names.ROLE_SWEEP and parent.info.status == "FAILED"
    assert parent.data.tags[names.JOBS] == "0" and client.tracking_uri == store_uri(workdir)
