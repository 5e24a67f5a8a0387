"""The ways users launch evalkit: `mlflow run` with one overrides string, and a third-party adapter
selected by import path with no change to evalkit."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time

import pytest
from helpers import REPO, job_runs, read_records, run_evalkit


def test_mlflow_run_main_entry_point_splits_the_overrides_string(workdir):
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "EVALKIT_DEFAULT_TRACKING_URI")}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env["MLFLOW_TRACKING_URI"] = f"sqlite:///{workdir}/mlflow.db"
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "mlflow"), "run", str(REPO), "-e", "main",
                           "--env-manager", "local", "--experiment-name", "evalkit",
                           "-P", "overrides=seed=3 precision=bf16_mixed train.max_steps=6 task.n_train=256 "
                                 "task.n_val=64 hydra.run.dir=" + str(workdir / "run")],
                          cwd=workdir, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    _, runs = job_runs(workdir)
    (run,) = runs                                   # evalkit recorded into the run `mlflow run` created
    assert run.info.status == "FINISHED"
    assert run.data.tags["evalkit.seed"] == "3" and run.data.tags["evalkit.precision"] == "bf16_mixed"
    assert run.data.tags.get("mlflow.project.entryPoint") == "main"
    assert "train/loss" in run.data.metrics


def test_third_party_adapter_by_import_path(workdir):
    (workdir / "my_adapter.py").write_text(textwrap.dedent('''
        import torch

        class PlainLoop:
            """A third-party adapter: nothing of evalkit's is edited to run it."""
            def __init__(self, mode="aligned", options=None):
                self.mode = mode
            def effective_config(self):
                return {"loop": "third party"}
            def fit(self, job):
                model = job.task.model
                opt = job.make_optimizer(model.parameters())
                sched = job.make_scheduler(opt)
                for step, (x, y) in enumerate(job.train_loader()):
                    if step == job.max_steps:
                        break
                    job.task.loss_fn(model(x), y).backward()
                    opt.step(); opt.zero_grad(); sched.step()
    '''))
    # what it needs is its trainer config's (here numpy stands for its wrapper: the version recorded is that of the
    # requirement's distribution)
    proc = run_evalkit(workdir, "trainer._target_=my_adapter.PlainLoop", "trainer.name=plain", "train.max_steps=5",
                       "trainer.requirements=[numpy]", "trainer.modules=[numpy]",
                       "task.n_train=256", "task.n_val=64", env={"PYTHONPATH": str(workdir)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    client, (run,) = job_runs(workdir)
    import numpy

    assert run.data.tags["evalkit.trainer"] == "plain" and run.data.tags["evalkit.wrapper_version"] == numpy.__version__
    assert [r["step"] for r in read_records(client, run.info.run_id)] == ["1", "2", "3", "4", "5"]


@pytest.fixture
def git_url(tmp_path):
    """The checkout's committed history as a bare repository served by `git daemon` on 127.0.0.1 (MLflow takes a
    file:// URL of an existing folder for a local project folder, not for a repository to clone)."""
    served = tmp_path / "served"
    served.mkdir()
    subprocess.run(["git", "clone", "-q", "--bare", str(REPO), str(served / "evalkit.git")], check=True)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    daemon = subprocess.Popen(["git", "daemon", "--reuseaddr", "--export-all", f"--base-path={served}",
                               "--listen=127.0.0.1", f"--port={port}", str(served)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"git://127.0.0.1:{port}/evalkit.git"
    deadline = time.monotonic() + 20
    while subprocess.run(["git", "ls-remote", url], capture_output=True).returncode:
        if daemon.poll() is not None or time.monotonic() > deadline:
            pytest.skip(f"GIT DAEMON NOT AVAILABLE: {daemon.stderr.read().decode()[-300:] if daemon.stderr else ''}")
        time.sleep(0.2)
    yield url
    daemon.terminate()
    daemon.wait(timeout=10)


def test_mlflow_run_from_a_repository_url_runs_main_and_sweep(workdir, git_url):
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "EVALKIT_DEFAULT_TRACKING_URI")}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env["MLFLOW_TRACKING_URI"] = f"sqlite:///{workdir}/mlflow.db"
    small = "train.max_steps=6 task.n_train=64 task.n_val=16 tracking.progress=quiet"
    for entry, overrides in (("main", f"seed=5 {small} hydra.run.dir={workdir / 'run'}"),
                             ("sweep", f"seed=0,1 {small} hydra.sweep.dir={workdir / 'multirun'}")):
        proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "mlflow"), "run", git_url, "-e", entry,
                               "--env-manager", "local", "--experiment-name", "evalkit",
                               "-P", f"overrides={overrides}"],
                              cwd=workdir, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
    _, runs = job_runs(workdir)
    single, parent = [r for r in runs if r.data.tags.get("mlflow.source.git.repoURL") == git_url]
    assert single.data.tags["mlflow.project.entryPoint"] == "main" and single.data.tags["evalkit.seed"] == "5"
    assert single.info.status == "FINISHED" and "train/loss" in single.data.metrics
    assert parent.data.tags["mlflow.project.entryPoint"] == "sweep" and parent.data.tags["evalkit.role"] == "sweep"
    assert parent.info.run_name.startswith("sweep-")
    jobs = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert sorted(r.data.tags["evalkit.seed"] for r in jobs) == ["0", "1"]
    assert all(r.info.status == "FINISHED" for r in jobs)
