"""Shared test helpers: run the real `evalkit` command in a temporary directory, read the real MLflow store.

Tests import them with `from helpers import ...` (tests/ is on sys.path: it has no __init__.py); fixtures
and the environment set-up stay in conftest.py."""
from __future__ import annotations

import csv
import os
import re
import subprocess
import sys
from pathlib import Path

CONF = Path(__file__).resolve().parents[1] / "conf"
_SCRIPT = os.path.join(os.path.dirname(sys.executable), "evalkit")
# The console script of an installed evalkit; without one (a GPU machine running from PYTHONPATH, see
# scripts/cuda_check.sh) the same entry point through the interpreter.
EVALKIT = [_SCRIPT] if os.path.exists(_SCRIPT) else [sys.executable, "-m", "evalkit"]


def run_evalkit(workdir, *overrides: str, multirun: bool = False, timeout: float = 600,
                env: dict | None = None) -> subprocess.CompletedProcess:
    """Run `evalkit [overrides]` in `workdir` (its local store is workdir/mlflow.db)."""
    full_env = {k: v for k, v in os.environ.items()
                if k not in ("MLFLOW_TRACKING_URI", "EVALKIT_DEFAULT_TRACKING_URI")}
    full_env.update(env or {})
    cmd = [*EVALKIT, *(["-m"] if multirun else []), *overrides, "tracking.progress_interval_s=1000"]
    return subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=timeout, env=full_env)


def store_uri(workdir) -> str:
    return f"sqlite:///{os.path.abspath(os.path.join(workdir, 'mlflow.db'))}"


def job_runs(workdir, experiment: str = "evalkit"):
    """Every run of the experiment, oldest first."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(store_uri(workdir))
    exp = client.get_experiment_by_name(experiment)
    runs = client.search_runs([exp.experiment_id], max_results=1000, order_by=["attributes.start_time ASC"])
    return client, runs


def probe_result(workdir, dimension: str):
    """The store's one probe run and its `probe/<dimension>.json`: (client, run, result)."""
    import json

    from mlflow.tracking import MlflowClient

    from evalkit import names

    client = MlflowClient(store_uri(workdir))
    exp = client.get_experiment_by_name("evalkit").experiment_id
    (run,) = client.search_runs([exp], f"tags.`{names.ROLE}` = 'probe'")
    with open(client.download_artifacts(run.info.run_id, f"probe/{dimension}.json")) as fh:
        return client, run, json.load(fh)


def read_records(client, run_id: str, name: str = "steps_rank0.csv") -> list[dict]:
    path = client.download_artifacts(run_id, f"records/{name}")
    with open(path) as fh:
        return list(csv.DictReader(fh))


def bundled_task_arguments(name: str) -> dict:
    """The keyword arguments the worker gives the builder of bundled task `name`: its YAML through its schema."""
    from omegaconf import OmegaConf

    from evalkit.tasks.schemas import BUNDLED, builder_arguments

    written = OmegaConf.load(CONF / "task" / f"{name}.yaml")
    written.pop("defaults")
    return builder_arguments(OmegaConf.merge(OmegaConf.structured(BUNDLED[name]), written))


def ok(proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 0, proc.stderr[-4000:]


def run_ok(workdir, *overrides: str):
    """Run evalkit, require success, return (client, the newest run)."""
    ok(run_evalkit(workdir, *overrides))
    client, runs = job_runs(workdir)
    return client, runs[-1]


def effective_config(client, run) -> dict:
    import json

    with open(client.download_artifacts(run.info.run_id, "evalkit/effective_config.json")) as fh:
        return json.load(fh)


def assert_bit_identical_to_baseline(client, wrapper, baseline, steps: int, val_steps: list[str]) -> None:
    """Aligned mode, fp32, one process: loss (within 1e-6 relative, and in fact to the last bit: the CSV
    holds repr-exact floats), LR, grad norm, micro-batches and validation equal the baseline's."""
    ours, theirs = read_records(client, wrapper.info.run_id), read_records(client, baseline.info.run_id)
    assert [r["step"] for r in ours] == [r["step"] for r in theirs] == [str(s) for s in range(1, steps + 1)]
    worst = max(abs(float(a["loss"]) - float(b["loss"])) / abs(float(b["loss"])) for a, b in zip(ours, theirs))
    assert worst <= 1e-6
    for a, b in zip(ours, theirs):
        assert (a["loss"], a["lr"], a["grad_norm"], a["micro_batches"]) == \
               (b["loss"], b["lr"], b["grad_norm"], b["micro_batches"]), a["step"]

    def val(run):
        return [(r["step"], r["mse"]) for r in read_records(client, run.info.run_id, "val_rank0.csv")]

    assert val(wrapper) == val(baseline) and [s for s, _ in val(wrapper)] == val_steps


# Shared settings of the adapter tests: 50 steps on a small split; resume runs stop at 40 on 2 ranks.
ADAPTER_SMALL = ["task.n_train=512", "task.n_val=128", "train.max_steps=50", "train.val_every=25"]
ADAPTER_RESUME = ["task.n_train=512", "task.n_val=128", "train.max_steps=40", "train.val_every=25",
                  "distributed=ddp", "distributed.world_size=2"]


def aligned_with_baseline(workdir, *trainer: str):
    """The wrapper, then the baseline, with ADAPTER_SMALL in one workdir: (client, wrapper, baseline)."""
    client, wrapper = run_ok(workdir, *trainer, *ADAPTER_SMALL)
    _, baseline = run_ok(workdir, "trainer=baseline", *ADAPTER_SMALL)
    return client, wrapper, baseline


def assert_resumed_at_step_21(client, continuous, resumed):
    """A run resumed from the step-20 checkpoint records steps 21..40 and step 21's LR is the continuous
    run's; returns (continuous rows by step, resumed rows) for further checks."""
    full = {r["step"]: r for r in read_records(client, continuous.info.run_id)}
    rest = read_records(client, resumed.info.run_id)
    assert rest[0]["step"] == "21" and rest[-1]["step"] == "40"
    assert rest[0]["lr"] == full["21"]["lr"]
    return full, rest


def bf16_accumulating(workdir, *trainer: str):
    """bf16_mixed with grad_accum=2 on ADAPTER_SMALL (precision and accumulation in one run): (client, run)."""
    return run_ok(workdir, *trainer, *ADAPTER_SMALL, "precision=bf16_mixed", "train.grad_accum=2")


def resumed_from_step_20(workdir, *trainer: str, checkpoint: str):
    """ADAPTER_RESUME twice in one workdir: a run checkpointing every 20 steps, then one resumed from its
    `checkpoint` (a name inside its checkpoint dir): (client, continuous, resumed, checkpoint path)."""
    client, continuous = run_ok(workdir, *trainer, *ADAPTER_RESUME, "train.ckpt_every=20")
    path = os.path.join(continuous.data.tags["evalkit.checkpoint_dir"], checkpoint)
    _, resumed = run_ok(workdir, *trainer, *ADAPTER_RESUME, f"resume_from={path}")
    return client, continuous, resumed, path


def assert_lightning_ranks_joined(client, run) -> None:
    """Lightning/Fabric at world size 2: exactly evalkit's two workers joined (each log announces its own
    rank once, nobody else's), validation merged over both ranks, 32 samples per rank and step."""
    run_dir = run.data.tags["evalkit.run_dir"]
    logs = sorted(f for f in os.listdir(run_dir) if re.fullmatch(r"worker_rank\d+\.log", f))
    assert logs == ["worker_rank0.log", "worker_rank1.log"]
    for rank, name in enumerate(logs):
        with open(os.path.join(run_dir, name)) as fh:
            joins = re.findall(r"GLOBAL_RANK: (\d+), MEMBER: (\d+)/(\d+)", fh.read())
        assert joins == [(str(rank), str(rank + 1), "2")]
    val = read_records(client, run.info.run_id, "val_rank0.csv")
    assert all(r["ranks"] == "2" and r["samples"] == "128" for r in val)
    assert all(r["samples"] == "32" for r in read_records(client, run.info.run_id))


def worker_pids(marker: str) -> list[int]:
    """Live evalkit worker processes whose command line names `marker` (their run directory)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmd = open(f"/proc/{entry}/cmdline", "rb").read().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if "evalkit.worker" in cmd and marker in cmd:
                found.append(int(entry))
    return found



# A real `mlflow server` (and PostgreSQL from a wheel) started by a test: scripts/team_server.py, which also starts
# one for a person to try a team's set-up by hand.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from team_server import MlflowServer, postgres_database, start_team_server  # noqa: E402,F401
