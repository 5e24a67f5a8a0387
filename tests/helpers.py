"""Shared test helpers: run the real `evalkit` command in a temporary directory, read the real MLflow store, wait
for workers, find a closed port.

Tests import them with `from helpers import ...` (tests/ is on sys.path: it has no __init__.py); fixtures and the
environment set-up stay in conftest.py. Beside this module, each on one subject: adapter_runs.py (the adapter
tests' runs), semantics_runs.py (the semantic probe's planted variants), probe_runs.py (every other probe's runs and
their recordings), team.py (a team's tracking server), fake_envs.py (a wrapper's environment without pip)."""
from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent          # tests/: helpers.py, planted/, fixtures/
REPO = TESTS.parent                              # the checkout
CONF = REPO / "conf"
PLANTED = TESTS / "planted"                      # wrong loops planted on purpose (tests/planted/README.md)
FIXTURES = TESTS / "fixtures"                    # recorded evidence (scripts/record_probe_fixtures.py)
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


def compose_config(*overrides: str, hydra: bool = False):
    """The job config `evalkit [overrides]` composes, in this process (with Hydra's own node when `hydra`)."""
    from hydra import compose, initialize_config_module

    from evalkit.config import register_configs

    register_configs()
    with initialize_config_module("evalkit.conf", version_base=None):
        return compose("config", overrides=list(overrides), return_hydra_config=hydra)


def numeric_settings(schema: type, prefix: str = "") -> list[str]:
    """The keys of a schema's numeric settings (a number, a list of numbers, nullable or not), nested ones too."""
    import dataclasses
    import typing

    out = []
    for name, kind in typing.get_type_hints(schema).items():
        if dataclasses.is_dataclass(kind):
            out += numeric_settings(kind, f"{prefix}{name}.")
        elif kind in (int, float, typing.Optional[int], typing.Optional[float], list[float], list[int]):
            out.append(f"{prefix}{name}")
    return out


def store_uri(workdir) -> str:
    return f"sqlite:///{os.path.abspath(os.path.join(workdir, 'mlflow.db'))}"


def job_runs(workdir, experiment: str = "evalkit"):
    """Every run of the experiment, oldest first."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(store_uri(workdir))
    exp = client.get_experiment_by_name(experiment)
    runs = client.search_runs([exp.experiment_id], max_results=1000, order_by=["attributes.start_time ASC"])
    return client, runs


def job_summary(client, run) -> dict:
    """A job's `evalkit/summary_rank0.json` (rank 0's start-up milestones, threads, import footprint, ...)."""
    import json

    with open(client.download_artifacts(run.info.run_id, "evalkit/summary_rank0.json")) as fh:
        return json.load(fh)


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


def wait_for_no_workers(marker: str, timeout: float, what: str = "a worker outlived its controller") -> None:
    """Wait until no evalkit worker whose command line names `marker` is alive; fail with `what` after `timeout`."""
    import time

    deadline = time.monotonic() + timeout
    while worker_pids(marker):
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def closed_port() -> int:
    """A local port nothing listens on."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------------ a store that fails under a sweep (evalkit-ship)
# The store fails once as the first job's run is recorded (its records wait in its spool), and once more as the
# sweep retries them at its end (as when that job's directory is busy); the parent run itself ends.
SWEEP_WITH_A_JOB_LEFT_WAITING = """
import sys
from evalkit.controller.job import run, ship
from evalkit import cli

finish, retry, failed = run.Controller._finish, ship.reship, []

def once(real, what):
    def planted(*args, **kwargs):
        if what not in failed:
            failed.append(what)
            raise RuntimeError("(sqlite3.OperationalError) database is locked")
        return real(*args, **kwargs)
    return planted

run.Controller._finish = once(finish, "job")
ship.reship = once(retry, "retry")
sys.argv = ["evalkit", "-m", *sys.argv[1:]]
cli.main()
"""
