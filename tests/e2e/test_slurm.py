"""evalkit on a real SLURM cluster (issue 47): Debian's slurm-wlm as two nodes on this host (scripts/slurm_up.sh:
munged, MariaDB and slurmdbd for sacct, slurmctld, slurmd n1 and n2), started by the test and stopped after it.

- a sweep through `hydra/launcher=evalkit_slurm` into a team's tracking server (helpers.Team: `mlflow server` with
  basic auth over PostgreSQL; its address and account reach the jobs only through sbatch's `--export=ALL`): jobs
  queued and run on the nodes, the parent and its counts right;
- a job past its `timeout_min`: stopped by SLURM, its run FAILED with SLURM's reason, the sweep FAILED and its exit
  non-zero, and `sweep.resume=true` runs only the job that did not finish;
- a sweep's jobs cancelled with `scancel`: KILLED, nothing left RUNNING;
- `srun --nodes=2 --ntasks-per-node=1 evalkit ...`: one run with a rank on each node, no node flags; resumed from its
  checkpoint by another srun, it equals the uninterrupted run bit for bit; a rank failing on one node fails both.
Skipped, naming the packages, where SLURM is not installed (`apt-get install -y slurm-wlm slurmdbd mariadb-server
munge`, as root)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from helpers import EVALKIT, job_runs, read_records, run_evalkit, store_uri

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


def on_server(team, experiment: str) -> list[str]:
    """A sweep's overrides to record into the team's server; its address and account come from the environment
    the sweep is submitted with (team.env), which sbatch's --export=ALL hands to the jobs."""
    return ["tracking=server", f"tracking.uri={team.url}", f"tracking.experiment={experiment}"]


def recorded(team, experiment: str) -> list:
    client = team.client()
    exp = client.get_experiment_by_name(experiment)
    return client.search_runs([exp.experiment_id], max_results=1000) if exp else []


def jobs_of(team, experiment: str) -> list:
    return [r for r in recorded(team, experiment) if r.data.tags.get("evalkit.role") == "job"]


def sweep_of(team, experiment: str):
    (parent,) = [r for r in recorded(team, experiment) if r.data.tags.get("evalkit.role") == "sweep"]
    return parent


def test_a_sweep_runs_its_jobs_on_the_nodes_and_counts_them(cluster, team, tmp_path):
    proc = run_evalkit(tmp_path, *LAUNCHER, *TINY, *on_server(team, "slurm_sweep"), "seed=0,1", "train.max_steps=10",
                       multirun=True, timeout=300, env={**cluster, **team.env})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not (tmp_path / "mlflow.db").exists()                     # every job found the server and its account
    jobs = jobs_of(team, "slurm_sweep")
    assert sorted(r.data.tags["evalkit.seed"] for r in jobs) == ["0", "1"]
    assert all(r.info.status == "FINISHED" for r in jobs)
    parent = sweep_of(team, "slurm_sweep")
    assert parent.info.status == "FINISHED" and parent.data.tags[names.JOBS] == "2"
    assert parent.data.tags[names.JOBS_FAILED] == "0"
    array = next(iter((tmp_path / "multirun").glob("*/*/.submitit")))
    lines = [line for job in {p.name.split("_")[0] for p in array.iterdir()} for line in sacct(cluster, job)]
    assert len(lines) == 2 and all("|COMPLETED|" in line for line in lines), lines
    print("\n".join(lines))


def test_a_job_past_its_time_limit_fails_the_sweep_and_resume_runs_only_it(cluster, team, tmp_path):
    # submitit signals the job (USR2) signal_delay_s before its time limit: 60 s into a 2-minute limit, time for
    # the short job to finish on a loaded machine
    server = on_server(team, "slurm_limit")
    sweep = ["hydra.launcher.timeout_min=2", "hydra.launcher.signal_delay_s=60", "train.max_steps=10,1000000",
             f"hydra.sweep.dir={tmp_path}/sweep"]
    started = time.monotonic()
    proc = run_evalkit(tmp_path, *LAUNCHER, *TINY, *server, *sweep, multirun=True, timeout=400,
                       env={**cluster, **team.env})
    assert proc.returncode != 0, proc.stderr[-3000:]
    jobs = {r.data.params["train.max_steps"]: r for r in jobs_of(team, "slurm_limit")}
    assert jobs["10"].info.status == "FINISHED" and jobs["1000000"].info.status == "FAILED"
    reason = jobs["1000000"].data.tags["evalkit.failure_reason"]
    assert "stopped at SLURM's time limit (submitit's SIGUSR2" in reason or "SLURM's time limit of" in reason, reason
    assert sweep_of(team, "slurm_limit").info.status == "FAILED"
    print(f"timed out in {time.monotonic() - started:.0f} s: {reason}")
    array = tmp_path / "sweep" / ".submitit"
    print("\n".join(line for job in {p.name.split("_")[0] for p in array.iterdir()} for line in sacct(cluster, job)))
    again = run_evalkit(tmp_path, *LAUNCHER, *TINY, *server, *sweep[:2], "train.max_steps=10,20", f"hydra.sweep.dir="
                        f"{tmp_path}/sweep", "sweep.resume=true", multirun=True, timeout=300,
                        env={**cluster, **team.env})
    assert again.returncode == 0, again.stderr[-3000:]
    ran = [r for r in jobs_of(team, "slurm_limit") if r.info.run_id not in {j.info.run_id for j in jobs.values()}]
    assert [r.data.params["train.max_steps"] for r in ran] == ["20"]          # the finished job was not run again


def test_scancel_leaves_every_run_ended_and_nothing_running(cluster, team, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "EVALKIT_DEFAULT_TRACKING_URI")}
    proc = subprocess.Popen([*EVALKIT, "-m", *LAUNCHER, *TINY, *on_server(team, "slurm_scancel"), "seed=0,1",
                             "train.max_steps=1000000"], cwd=tmp_path, env={**env, **cluster, **team.env},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while len(slurm_jobs(cluster)) < 2 and time.monotonic() < deadline:
        time.sleep(1)
    time.sleep(8)                                     # the jobs' runs exist and train
    queued = slurm_jobs(cluster)
    subprocess.run(["scancel", *queued], env={**os.environ, **cluster}, check=True, timeout=30)
    _, err = proc.communicate(timeout=180)
    assert proc.returncode != 0 and "CANCELLED" in err, err[-3000:]
    deadline = time.monotonic() + 60      # each job's controller ends its run within SLURM's KillWait (30 s)
    while any(r.info.status == "RUNNING" for r in jobs_of(team, "slurm_scancel")) and time.monotonic() < deadline:
        time.sleep(2)
    statuses = sorted(r.info.status for r in jobs_of(team, "slurm_scancel"))
    assert statuses == ["KILLED", "KILLED"], statuses
    assert sweep_of(team, "slurm_scancel").info.status == "FAILED"
    print("\n".join(line for job in {q.split("_")[0] for q in queued} for line in sacct(cluster, job)))


def srun_job(cluster, root, *overrides: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """`srun --nodes=2 --ntasks-per-node=1 evalkit ...` from `root`, recording into root's store: no node flags."""
    full = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "EVALKIT_DEFAULT_TRACKING_URI")}
    cmd = ["srun", "--nodes=2", "--ntasks-per-node=1", *EVALKIT, *TINY, "distributed=ddp", "distributed.world_size=2",
           "hardware.threads=1", f"distributed.shared_root={root}/shared", f"tracking.uri={store_uri(root)}",
           "tracking.progress_interval_s=1000", *overrides]
    return subprocess.run(cmd, cwd=root, env={**full, **cluster, **(env or {})}, capture_output=True, text=True,
                          timeout=300)


@pytest.fixture(scope="module")
def srun_runs(cluster, tmp_path_factory):
    """A two-node job of 20 steps checkpointing at 10, then a second srun resuming it from step 10: (client,
    uninterrupted run, resumed run, the first srun's stderr)."""
    root = tmp_path_factory.mktemp("srun")
    job = ["train.max_steps=20", "train.val_every=10", "task.n_val=64"]
    first = srun_job(cluster, root, *job, "train.ckpt_every=10")
    assert first.returncode == 0, first.stderr[-3000:]
    client, (whole,) = job_runs(root)
    checkpoint = Path(whole.data.tags["evalkit.checkpoint_dir"]) / "step_00000010.pt"
    second = srun_job(cluster, root, *job, f"resume_from={checkpoint}")
    assert second.returncode == 0, second.stderr[-3000:]
    _, runs = job_runs(root)
    (resumed,) = [r for r in runs if r.info.run_id != whole.info.run_id]
    return client, whole, resumed, first.stderr


def test_srun_on_two_nodes_records_one_run_with_a_rank_on_each(srun_runs):
    _, run, _, stderr = srun_runs
    assert run.info.status == "FINISHED" and run.data.params["distributed.nnodes"] == "2"
    assert run.data.params["distributed.master_addr"] == "n1"
    assert "perf/peak_mem_bytes_rank1" in run.data.metrics
    assert "node 1 (rank 1): its ranks FINISHED" in stderr


def test_a_two_node_run_resumed_by_another_srun_equals_the_uninterrupted_run_bit_for_bit(srun_runs):
    client, whole, resumed, _ = srun_runs
    assert resumed.info.status == "FINISHED" and resumed.data.tags["evalkit.resumed_at_step"] == "10"
    assert whole.data.tags["evalkit.run_dir"] != resumed.data.tags["evalkit.run_dir"]     # another job's folder
    full = {r["step"]: r for r in read_records(client, whole.info.run_id)}
    rest = read_records(client, resumed.info.run_id)
    assert [r["step"] for r in rest] == [str(s) for s in range(11, 21)]
    for row in rest:   # the CSV holds repr-exact floats: string equality is bit equality
        assert [row[c] for c in ("loss", "lr", "grad_norm", "samples")] == \
               [full[row["step"]][c] for c in ("loss", "lr", "grad_norm", "samples")], row["step"]
    val = [read_records(client, run.info.run_id, "val_rank0.csv") for run in (whole, resumed)]
    assert val[1] == [r for r in val[0] if r["step"] == "20"] and val[1][0]["ranks"] == "2"
    micro = [read_records(client, run.info.run_id, "micro_rank1.csv") for run in (whole, resumed)]
    assert micro[1] == [r for r in micro[0] if int(r["step"]) > 10] and micro[1]      # node 1's rank, resumed too


def test_a_rank_failing_on_one_node_fails_the_srun_job_on_both(cluster, tmp_path):
    (tmp_path / "rank_fault.py").write_text(
        "import os\nfrom evalkit.adapters.baseline import BaselineAdapter\n\n\n"
        "class FailsOnRank1(BaselineAdapter):\n    def fit(self, job):\n"
        "        if os.environ['RANK'] == '1':\n            raise RuntimeError('planted failure of rank 1')\n"
        "        super().fit(job)\n")
    started = time.monotonic()
    proc = srun_job(cluster, tmp_path, "train.max_steps=10", "trainer._target_=rank_fault.FailsOnRank1",
                    "trainer.name=rank_fault", env={"PYTHONPATH": str(tmp_path)})
    assert proc.returncode != 0, proc.stderr[-3000:]
    client, (run,) = job_runs(tmp_path)
    reason = run.data.tags["evalkit.failure_reason"]
    assert run.info.status == "FAILED" and reason.startswith("rank 1: RuntimeError: planted failure of rank 1"), reason
    assert "node 1 (rank 1): rank 1: RuntimeError: planted failure of rank 1" in proc.stderr, proc.stderr[-3000:]
    print(f"both nodes ended in {time.monotonic() - started:.0f} s")


@pytest.mark.parametrize("trainer", ["lightning", "fabric", "ignite", "accelerate", "hf_trainer"])
def test_each_wrapper_runs_its_ranks_on_two_nodes_under_srun(cluster, tmp_path, trainer):
    """Inside a SLURM job the ranks are evalkit's, not SLURM's tasks: Lightning's SLURMEnvironment and Ignite read
    SLURM's task variables as theirs unless evalkit removes them (launchers.SCHEDULER_PREFIXES), and Lightning
    counts `devices` per node (`num_nodes` the nodes)."""
    proc = srun_job(cluster, tmp_path, f"trainer={trainer}", "train.max_steps=10", "train.val_every=5")
    assert proc.returncode == 0, proc.stderr[-3000:]
    client, (run,) = job_runs(tmp_path)
    assert run.info.status == "FINISHED" and "perf/peak_mem_bytes_rank1" in run.data.metrics
    assert "node 1 (rank 1): its ranks FINISHED" in proc.stderr
    launch = json.loads(Path(client.download_artifacts(run.info.run_id, "evalkit/launch_rank1.json",
                                                       str(tmp_path))).read_text())
    assert launch["EVALKIT_RANK"] == "1" and not [k for k in launch if k.startswith("SLURM_")], launch
