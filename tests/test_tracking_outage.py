"""A tracking outage loses nothing: a real `mlflow server` on 127.0.0.1 dies mid-run, evalkit says how to
recover, and `evalkit-ship` records every step once the server is back."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest
from helpers import EVALKIT

from evalkit.controller.launch import free_port

pytestmark = pytest.mark.e2e
MLFLOW = os.path.join(os.path.dirname(sys.executable), "mlflow")


def _start_server(tmp_path, port: int) -> subprocess.Popen:
    proc = subprocess.Popen([MLFLOW, "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
                             "--backend-store-uri", f"sqlite:///{tmp_path}/server.db",
                             "--artifacts-destination", f"{tmp_path}/artifacts"],
                            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return proc
        except OSError:
            time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGKILL)
    pytest.fail("mlflow server did not answer /health within 90 s")


def test_outage_mid_run_then_reship(tmp_path):
    port = free_port()
    uri = f"http://127.0.0.1:{port}"
    server = _start_server(tmp_path, port)
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0",
           "MLFLOW_HTTP_REQUEST_TIMEOUT": "5"}
    job = subprocess.Popen([*EVALKIT, "train.max_steps=200", "train.val_every=100", "hydra.run.dir=run",
                            "tracking.flush_interval_s=0.2"], cwd=tmp_path, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    spool = tmp_path / "run" / "spool" / "records_rank0.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not spool.exists() or spool.read_text().count('"kind":"step"') < 20):
        time.sleep(0.2)
    os.killpg(server.pid, signal.SIGKILL)                 # the outage
    server.wait()
    _, stderr = job.communicate(timeout=300)
    assert job.returncode != 0
    assert f"evalkit-ship {tmp_path / 'run'}" in stderr and "Traceback" not in stderr
    assert spool.read_text().count('"kind":"step"') == 200   # training went on without the server

    server = _start_server(tmp_path, port)
    try:
        ship = subprocess.run([os.path.join(os.path.dirname(sys.executable), "evalkit-ship"), str(tmp_path / "run")],
                              env=env, capture_output=True, text=True, timeout=300)
        assert ship.returncode == 0, ship.stderr
        from mlflow.tracking import MlflowClient

        client = MlflowClient(uri)
        (run,) = client.search_runs([client.get_experiment_by_name("evalkit").experiment_id])
        assert run.info.status == "FINISHED"
        steps = [m.step for m in client.get_metric_history(run.info.run_id, "train/loss")]
        assert sorted(steps) == list(range(1, 201))           # every step, none twice
        assert "records/steps_rank0.csv" in {a.path for a in client.list_artifacts(run.info.run_id, "records")}
    finally:
        os.killpg(server.pid, signal.SIGKILL)
