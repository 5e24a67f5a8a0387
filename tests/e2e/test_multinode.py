"""One job over two nodes (issue 15): two `evalkit` controllers on 127.0.0.1, node_rank 0 and 1, one rank each,
meeting in a shared directory, record exactly what one controller with both ranks records; node 1 records nothing
in MLflow, a failure of its rank fails node 0's run with its cause, and a misconfigured multi-node job is one
clear error before anything is recorded."""
from __future__ import annotations

import os
import subprocess

import pytest
from helpers import EVALKIT, job_runs, read_records, run_evalkit, store_uri

from evalkit.config import register_configs
from evalkit.controller.launch.workers import free_port

register_configs()
# Both ranks with one intra-op thread, whichever node runs them: the same arithmetic, so the same bits.
JOB = ["trainer=baseline", "task.n_train=256", "task.n_val=64", "train.max_steps=10", "train.val_every=5",
       "hardware.threads=1", "tracking.system_metrics_interval_s=0", "tracking.progress=plain", "distributed=ddp",
       "distributed.world_size=2"]
NODE_KEYS = {"distributed.nnodes", "distributed.master_port", "distributed.shared_dir"}


def start_evalkit(cwd, *overrides: str, env: dict | None = None) -> subprocess.Popen:
    """`evalkit [overrides]` started in `cwd` (as helpers.run_evalkit, without waiting)."""
    os.makedirs(cwd, exist_ok=True)
    full_env = {k: v for k, v in os.environ.items()
                if k not in ("MLFLOW_TRACKING_URI", "EVALKIT_DEFAULT_TRACKING_URI")}
    full_env.update(env or {})
    return subprocess.Popen([*EVALKIT, *overrides, "tracking.progress_interval_s=1000"],
                            cwd=cwd, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def two_nodes(root, *overrides: str, env: dict | None = None, beside: list[str] | None = None) -> list[tuple[int, str]]:
    """Node 0 and node 1 of one job, each in its own launch directory, recording into root's store: [(exit code,
    stderr)] per node; with `beside`, a one-node job of those overrides runs meanwhile (in root/one), last in the
    list."""
    shared = os.path.join(root, "shared")
    common = [*JOB, *overrides, "distributed.nnodes=2", f"distributed.master_port={free_port()}",
              f"distributed.shared_dir={shared}", f"tracking.uri={store_uri(root)}"]
    procs = [start_evalkit(os.path.join(root, f"node{k}"), *common, f"distributed.node_rank={k}", env=env)
             for k in (0, 1)]
    if beside is not None:
        procs.append(start_evalkit(os.path.join(root, "one"), *JOB, *beside, f"tracking.uri={store_uri(root)}"))
    ends = []
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        ends.append((proc.returncode, err))
    return ends


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    """The same job on two nodes (one rank each) and, meanwhile, on one node (two ranks), in one store: (client,
    one-node run, two-node run, [(exit code, stderr)] of the two nodes, the root folder)."""
    root = str(tmp_path_factory.mktemp("multinode"))
    *ends, single = two_nodes(root, beside=[])
    for code, err in [*ends, single]:
        assert code == 0, err[-3000:]
    client, runs = job_runs(root)
    assert len(runs) == 2, [r.data.tags.get("evalkit.run_dir") for r in runs]    # node 1 created no run
    shared = os.path.join(root, "shared")
    two = next(r for r in runs if r.data.tags["evalkit.run_dir"] == shared)
    one = next(r for r in runs if r is not two)
    return client, one, two, ends, root


def test_two_nodes_record_one_finished_run_and_node_1_records_nothing(jobs):
    client, one, two, ends, root = jobs
    assert one.info.status == two.info.status == "FINISHED"
    assert two.data.tags["evalkit.run_dir"] == os.path.join(root, "shared")
    assert two.data.params["distributed.nnodes"] == "2" and two.data.params["distributed.node_rank"] == "0"
    assert not os.path.exists(os.path.join(root, "node1", "mlflow.db"))       # node 1 never opened a store
    (_, err1) = ends[1]
    assert f"node 1 (rank 1): its ranks FINISHED; node 0 records run {two.info.run_id}" in err1
    assert "evalkit: " not in err1.replace("[evalkit]", "")                   # no error, no run address
    # Node 1's rank is in the run: its summary, its log, its memory and its share of every validation.
    artifacts = {a.path for d in ("evalkit", "logs") for a in client.list_artifacts(two.info.run_id, d)}
    assert {"evalkit/summary_rank1.json", "logs/worker_rank1.log"} <= artifacts
    assert "perf/peak_mem_bytes_rank1" in two.data.metrics


def test_two_nodes_train_bit_for_bit_like_one_node(jobs):
    client, one, two, _, _ = jobs
    for key in ("train/loss", "train/lr", "train/grad_norm", "val/loss", "val/mse"):
        a = [(m.step, m.value) for m in client.get_metric_history(one.info.run_id, key)]
        b = [(m.step, m.value) for m in client.get_metric_history(two.info.run_id, key)]
        assert a == b and a, key
    steps = [read_records(client, run.info.run_id) for run in (one, two)]
    columns = ("step", "loss", "lr", "grad_norm", "micro_batches", "samples")
    assert [[r[c] for c in columns] for r in steps[0]] == [[r[c] for c in columns] for r in steps[1]]
    val = [read_records(client, run.info.run_id, "val_rank0.csv") for run in (one, two)]
    assert val[0] == val[1] and [r["ranks"] for r in val[1]] == ["2", "2"]       # merged over both nodes' ranks
    micro = [read_records(client, run.info.run_id, "micro_rank1.csv") for run in (one, two)]
    assert micro[0] == micro[1] and micro[1]                                    # rank 1's samples, from node 1


def test_two_nodes_record_the_same_params_but_the_node_keys(jobs):
    _, one, two, _, _ = jobs
    differ = {k for k in set(one.data.params) | set(two.data.params)
              if one.data.params.get(k) != two.data.params.get(k)}
    assert differ == NODE_KEYS
    assert one.data.tags["evalkit.caliber"] == two.data.tags["evalkit.caliber"]


def test_both_nodes_of_a_resumed_job_reuse_its_finished_run_wherever_they_meet(jobs):
    """sweep.resume=true on a FINISHED two-node job, on another port: node 0 reuses the run, and node 1 too
    instead of waiting for a node 0 that never comes (the fingerprint leaves out where the nodes meet)."""
    _, _, two, _, root = jobs
    (code0, err0), (code1, err1) = two_nodes(root, "sweep.resume=true", "distributed.node_timeout_s=60")
    for code, err in ((code0, err0), (code1, err1)):
        assert code == 0 and f"already FINISHED as run {two.info.run_id} (same fingerprint): reused" in err, err[-2000:]
        assert "waiting for node 0" not in err
    assert len(job_runs(root)[1]) == 2

def test_a_failing_rank_on_node_1_fails_both_nodes_with_its_cause(tmp_path):
    (tmp_path / "rank_fault.py").write_text(
        "import os\nfrom evalkit.adapters.baseline import BaselineAdapter\n\n\n"
        "class FailsOnRank1(BaselineAdapter):\n    def fit(self, job):\n"
        "        if os.environ['RANK'] == '1':\n            raise RuntimeError('planted failure of rank 1')\n"
        "        super().fit(job)\n")
    (code0, err0), (code1, err1) = two_nodes(str(tmp_path), "trainer._target_=rank_fault.FailsOnRank1",
                                             "trainer.name=rank_fault", env={"PYTHONPATH": str(tmp_path)})
    assert code0 == 1 and code1 == 1, (err0[-2000:], err1[-2000:])
    client, (run,) = job_runs(tmp_path)
    reason = run.data.tags["evalkit.failure_reason"]
    assert run.info.status == "FAILED" and reason.startswith("rank 1: RuntimeError: planted failure of rank 1"), reason
    assert "node 1 (rank 1): rank 1: RuntimeError: planted failure of rank 1 (exit codes [1])" in err1
    assert "failure/error_rank1.txt" in {a.path for a in client.list_artifacts(run.info.run_id, "failure")}


MULTI = ["distributed=ddp", "distributed.nnodes=2", "distributed.shared_dir=/shared/job"]


@pytest.mark.parametrize("overrides,key", [
    (["distributed.world_size=2"], "distributed.master_port=null"),
    (["distributed.world_size=3", "distributed.master_port=29500"], "distributed.world_size=3 is not divisible"),
])
def test_a_misconfigured_multinode_job_exits_non_zero_before_recording(tmp_path, overrides, key):
    proc = run_evalkit(tmp_path, *MULTI, *overrides)
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines() if line.startswith("evalkit: invalid config:")]
    assert len(lines) == 1 and key in lines[0], proc.stderr[-2000:]
    assert not os.path.exists(tmp_path / "mlflow.db") and not os.path.exists("/shared/job")


def test_srun_on_two_nodes_needs_no_node_flags(tmp_path):
    """`srun --nodes=2 --ntasks-per-node=1 evalkit ...` (issue 47): each node's evalkit reads its node rank, the node
    count, rank 0's host and port and the step's shared folder from SLURM's variables, as srun sets them on two
    nodes (both here on 127.0.0.1: a host list of two names for one machine)."""
    root, job_id = str(tmp_path), str(900000 + free_port() % 1000)
    step = {"SLURM_JOB_ID": job_id, "SLURM_STEP_ID": "0", "SLURM_STEP_NUM_NODES": "2", "SLURM_STEP_NUM_TASKS": "2",
            "SLURM_STEP_NODELIST": "localhost,ip6-localhost", "SLURM_JOB_NODELIST": "localhost,ip6-localhost"}
    common = [*JOB, f"distributed.shared_root={root}/shared", f"tracking.uri={store_uri(root)}"]
    procs = [start_evalkit(os.path.join(root, f"node{k}"), *common,
                           env={**step, "SLURM_PROCID": str(k), "SLURM_NODEID": str(k)}) for k in (0, 1)]
    ends = []
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        ends.append((proc.returncode, err))
    assert [code for code, _ in ends] == [0, 0], ends[0][1][-2000:] + ends[1][1][-2000:]
    _, runs = job_runs(root)
    (run,) = runs
    assert run.info.status == "FINISHED"
    assert run.data.tags["evalkit.run_dir"] == os.path.join(root, "shared", f"slurm-{job_id}.0")
    assert run.data.params["distributed.nnodes"] == "2" and run.data.params["distributed.master_addr"] == "localhost"
    assert "perf/peak_mem_bytes_rank1" in run.data.metrics                   # node 1's rank is in the run
