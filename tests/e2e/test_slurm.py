"""evalkit on a real SLURM cluster (issue 47): Debian's slurm-wlm as two nodes on this host (scripts/slurm_up.sh:
munged, MariaDB and slurmdbd for sacct, slurmctld, slurmd n1 and n2), started by the test and stopped after it.

- a sweep through `hydra/launcher=evalkit_slurm`: jobs queued and run on the nodes, the parent and its counts right;
- a job past its `timeout_min`: stopped by SLURM, its run and the sweep say so, the sweep exits non-zero, and
  `sweep.resume=true` runs only the job that did not finish;
- a sweep's jobs cancelled with `scancel`: KILLED, nothing left RUNNING;
- `srun --nodes=2 --ntasks-per-node=1 evalkit ...`: one run with a rank on each node, no node flags.
Skipped, naming the packages, where SLURM is not installed (`apt-get install -y slurm-wlm slurmdbd mariadb-server
munge`, as root)."""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from helpers import EVALKIT, job_runs, run_evalkit, store_uri

from evalkit import names

REPO = Path(__file__).resolve().parents[2]
NEEDED = ("slurmctld", "slurmd", "slurmdbd", "munged", "mariadbd", "sbatch", "srun", "sacct")
pytestmark = pytest.mark.skipif(any(shutil.which(c) is None for c in NEEDED),
                                reason="SLURM is not installed here: apt-get install -y slurm-wlm slurmdbd "
                                       "mariadb-server munge (as root), then scripts/slurm_up.sh")
LAUNCHER = ["hydra/launcher=evalkit_slurm", "hydra.launcher.partition=test", "hydra.launcher.gpus_per_node=0",
            "hydra.launcher.cpus_per_task=1", "hydra.launcher.mem_gb=1", "hardware.threads=1"]
TINY = ["trainer=baseline", "task.n_train=256", "train.val_every=0", "tracking.progress=plain"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """The cluster's environment (SLURM_CONF), for as long as this module runs."""
    root = tmp_path_factory.mktemp("slurm")
    env = {**os.environ, "SLURM_ROOT": str(root)}
    up = subprocess.run(["bash", str(REPO / "scripts" / "slurm_up.sh")], env=env, capture_output=True, text=True,
                        timeout=180, stdin=subprocess.DEVNULL)
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        yield {"SLURM_CONF": str(root / "slurm.conf")}
    finally:
        subprocess.run(["bash", str(REPO / "scripts" / "slurm_down.sh")], env=env, timeout=60)


def sacct(cluster, job: str) -> list[str]:
    """`sacct` lines of a SLURM job (array tasks included): JobID|JobName|State|NodeList|ExitCode."""
    out = subprocess.run(["sacct", "-n", "-X", "-P", "-o", "JobID,JobName,State,NodeList,ExitCode", "-j", job],
                         env={**os.environ, **cluster}, capture_output=True, text=True, timeout=30).stdout
    return [line for line in out.splitlines() if line.strip()]


def slurm_jobs(cluster) -> set[str]:
    out = subprocess.run(["squeue", "-h", "-o", "%i"], env={**os.environ, **cluster}, capture_output=True,
                         text=True, timeout=30).stdout
    return set(out.split())


def jobs_of(workdir) -> list:
    _, runs = job_runs(workdir)
    return [r for r in runs if r.data.tags.get("evalkit.role") == "job"]


def sweep_of(workdir):
    _, runs = job_runs(workdir)
    (parent,) = [r for r in runs if r.data.tags.get("evalkit.role") == "sweep"]
    return parent


def test_a_sweep_runs_its_jobs_on_the_nodes_and_counts_them(cluster, tmp_path):
    proc = run_evalkit(tmp_path, *LAUNCHER, *TINY, "seed=0,1", "train.max_steps=10", multirun=True, timeout=300,
                       env=cluster)
    assert proc.returncode == 0, proc.stderr[-3000:]
    jobs = jobs_of(tmp_path)
    assert sorted(r.data.tags["evalkit.seed"] for r in jobs) == ["0", "1"]
    assert all(r.info.status == "FINISHED" for r in jobs)
    parent = sweep_of(tmp_path)
    assert parent.info.status == "FINISHED" and parent.data.tags[names.JOBS] == "2"
    assert parent.data.tags[names.JOBS_FAILED] == "0"
    array = next(iter((tmp_path / "multirun").glob("*/*/.submitit")))
    lines = [line for job in {p.name.split("_")[0] for p in array.iterdir()} for line in sacct(cluster, job)]
    assert len(lines) == 2 and all("|COMPLETED|" in line for line in lines), lines
    print("\n".join(lines))


def test_a_job_past_its_time_limit_fails_the_sweep_and_resume_runs_only_it(cluster, tmp_path):
    # submitit signals the job (USR2) signal_delay_s before its time limit: 60 s into a 2-minute limit, time for
    # the short job to finish on a loaded machine
    sweep = ["hydra.launcher.timeout_min=2", "hydra.launcher.signal_delay_s=60", "train.max_steps=10,1000000",
             f"hydra.sweep.dir={tmp_path}/sweep"]
    started = time.monotonic()
    proc = run_evalkit(tmp_path, *LAUNCHER, *TINY, *sweep, multirun=True, timeout=400, env=cluster)
    assert proc.returncode != 0, proc.stderr[-3000:]
    jobs = {r.data.params["train.max_steps"]: r for r in jobs_of(tmp_path)}
    assert jobs["10"].info.status == "FINISHED" and jobs["1000000"].info.status == "KILLED"
    assert "stopped at SLURM's time limit (submitit's SIGUSR2" in jobs["1000000"].data.tags["evalkit.failure_reason"]
    assert sweep_of(tmp_path).info.status == "FAILED"
    print(f"timed out in {time.monotonic() - started:.0f} s")
    again = run_evalkit(tmp_path, *LAUNCHER, *TINY, *sweep[:2], "train.max_steps=10,20", f"hydra.sweep.dir="
                        f"{tmp_path}/sweep", "sweep.resume=true", multirun=True, timeout=300, env=cluster)
    assert again.returncode == 0, again.stderr[-3000:]
    ran = [r for r in jobs_of(tmp_path) if r.info.run_id not in {j.info.run_id for j in jobs.values()}]
    assert [r.data.params["train.max_steps"] for r in ran] == ["20"]          # the finished job was not run again


def test_scancel_leaves_every_run_ended_and_nothing_running(cluster, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "EVALKIT_DEFAULT_TRACKING_URI")}
    proc = subprocess.Popen([*EVALKIT, "-m", *LAUNCHER, *TINY, "seed=0,1", "train.max_steps=1000000"],
                            cwd=tmp_path, env={**env, **cluster}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 120
    while len(slurm_jobs(cluster)) < 2 and time.monotonic() < deadline:
        time.sleep(1)
    time.sleep(8)                                     # the jobs' runs exist and train
    queued = slurm_jobs(cluster)
    subprocess.run(["scancel", *queued], env={**os.environ, **cluster}, check=True, timeout=30)
    _, err = proc.communicate(timeout=180)
    assert proc.returncode != 0 and "CANCELLED" in err, err[-3000:]
    deadline = time.monotonic() + 60      # each job's controller ends its run within SLURM's KillWait (30 s)
    while any(r.info.status == "RUNNING" for r in jobs_of(tmp_path)) and time.monotonic() < deadline:
        time.sleep(2)
    statuses = sorted(r.info.status for r in jobs_of(tmp_path))
    assert statuses == ["KILLED", "KILLED"], statuses
    assert sweep_of(tmp_path).info.status == "FAILED"
    print("\n".join(line for job in {q.split("_")[0] for q in queued} for line in sacct(cluster, job)))


def test_srun_on_two_nodes_records_one_run_with_a_rank_on_each(cluster, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "EVALKIT_DEFAULT_TRACKING_URI")}
    cmd = ["srun", "--nodes=2", "--ntasks-per-node=1", *EVALKIT, *TINY, "train.max_steps=10", "distributed=ddp",
           "distributed.world_size=2", f"distributed.shared_root={tmp_path}/shared",
           f"tracking.uri={store_uri(tmp_path)}"]
    proc = subprocess.run(cmd, cwd=tmp_path, env={**env, **cluster}, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = jobs_of(tmp_path)
    assert run.info.status == "FINISHED" and run.data.params["distributed.nnodes"] == "2"
    assert run.data.params["distributed.master_addr"] == "n1"
    assert "perf/peak_mem_bytes_rank1" in run.data.metrics
    assert "node 1 (rank 1): its ranks FINISHED" in proc.stderr
