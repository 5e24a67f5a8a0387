"""Failures keep their records; the tracking layout is what docs/records.md and docs/running.md say; bad input gets
one clear message."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time

from helpers import EVALKIT, job_runs, read_records, run_evalkit, worker_pids


def test_sigkilled_worker_leaves_a_failed_run_with_its_records(workdir):
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    proc = subprocess.Popen([*EVALKIT, "train.max_steps=100000", "train.val_every=0", "tracking.flush_interval_s=0.2",
                             "hydra.run.dir=run"], cwd=workdir, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    spool = workdir / "run" / "spool" / "records_rank0.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not spool.exists() or spool.read_text().count('"kind":"step"') < 30):
        time.sleep(0.2)
    pids = worker_pids(str(workdir / "run"))
    assert len(pids) == 1, pids
    os.kill(pids[0], signal.SIGKILL)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode != 0
    assert "FAILED" in stderr and "SIGKILL" in stderr
    recorded = [json.loads(line) for line in spool.read_text().splitlines()]
    last_step = max(r["step"] for r in recorded if r["kind"] == "step")
    client, (run,) = job_runs(workdir)
    assert run.info.status == "FAILED"
    assert "SIGKILL" in run.data.tags["evalkit.failure_reason"]
    history = client.get_metric_history(run.info.run_id, "train/loss")
    assert len(history) == last_step >= 30                      # every finished step reached MLflow
    assert len(read_records(client, run.info.run_id)) == last_step
    assert [a.path for a in client.list_artifacts(run.info.run_id, "logs")] == ["logs/worker_rank0.log"]


def test_sweep_layout_parent_children_params_tags_artifacts(workdir):
    proc = run_evalkit(workdir, "seed=0,1", "precision=fp32,bf16_mixed", "train.max_steps=8", "train.val_every=4",
                       "task.n_train=256", "task.n_val=64", multirun=True,
                       env={"MY_SERVICE_TOKEN": "s3cr3t-value", "HF_TOKEN": "hf_s3cr3t"})
    assert proc.returncode == 0, proc.stderr
    client, runs = job_runs(workdir)
    parents = [r for r in runs if r.data.tags.get("evalkit.role") == "sweep"]
    children = [r for r in runs if r.data.tags.get("evalkit.role") == "job"]
    assert len(parents) == 1 and len(children) == 4
    parent = parents[0]
    assert parent.info.status == "FINISHED"
    assert all(c.data.tags["mlflow.parentRunId"] == parent.info.run_id for c in children)
    assert all(c.info.status == "FINISHED" for c in children)
    assert {(c.data.tags["evalkit.seed"], c.data.tags["evalkit.precision"]) for c in children} == \
           {("0", "fp32"), ("0", "bf16_mixed"), ("1", "fp32"), ("1", "bf16_mixed")}
    child = next(c for c in children if c.data.tags["evalkit.precision"] == "bf16_mixed")
    tags = child.data.tags
    for key in ("evalkit.trainer", "evalkit.mode", "evalkit.task", "evalkit.caliber", "evalkit.hardware",
                "evalkit.sweep_id", "evalkit.wrapper_version", "evalkit.torch_version", "evalkit.val_metric",
                "evalkit.val_metric_higher_is_better", "evalkit.observed_precision"):
        assert tags.get(key), key
    assert tags["evalkit.sweep_id"] == parent.data.tags["evalkit.sweep_id"]
    assert tags["evalkit.observed_precision"] == "bfloat16"
    threads = max(1, os.cpu_count() or 1)     # hardware.threads=0: the machine's cores over one rank
    assert tags["evalkit.caliber"] == f"hw=cpu|thr={threads}|bs=32|accum=1|prec=bf16_mixed|ws=1|warmup=5"
    assert child.data.params["hardware.threads"] == str(threads)
    assert child.data.params["train.lr"] == "0.001" and child.data.params["trainer._target_"]
    for key in ("train/loss", "train/lr", "train/grad_norm", "train/step_time_s", "val/mse", "val/loss",
                "perf/samples_per_s", "perf/steps_per_s", "perf/peak_mem_bytes"):
        assert key in child.data.metrics, key
    assert len(client.get_metric_history(child.info.run_id, "train/lr")) == 8
    artifacts = set()
    for folder in ("config", "env", "evalkit", "records", "logs"):
        artifacts |= {a.path for a in client.list_artifacts(child.info.run_id, folder)}
    assert {"config/resolved.yaml", "env/lock.txt", "env/hardware.json", "evalkit/effective_config.json",
            "evalkit/versions.json", "records/steps_rank0.csv", "records/val_rank0.csv",
            "records/micro_rank0.csv", "logs/worker_rank0.log"} <= artifacts
    lock = open(client.download_artifacts(child.info.run_id, "env/lock.txt")).read()
    assert "torch==2.13.0" in lock and "mlflow==" in lock
    everything = json.dumps([r.data.params for r in runs]) + json.dumps([r.data.tags for r in runs])
    for path in ("config/resolved.yaml", "env/hardware.json", "evalkit/effective_config.json"):
        everything += open(client.download_artifacts(child.info.run_id, path)).read()
    assert "s3cr3t" not in everything


def test_a_failed_job_does_not_stop_the_sweep_and_the_command_exits_nonzero(workdir):
    proc = run_evalkit(workdir, "train.batch_size=64,4096", "train.max_steps=4", "task.n_train=256",
                       "task.n_val=64", multirun=True)
    assert proc.returncode != 0
    _, runs = job_runs(workdir)
    statuses = sorted((r.data.params.get("train.batch_size"), r.info.status) for r in runs
                      if r.data.tags.get("evalkit.role") == "job")
    assert statuses == [("4096", "FAILED"), ("64", "FINISHED")]
    failed = next(r for r in runs if r.info.status == "FAILED" and r.data.tags.get("evalkit.role") == "job")
    assert "lower train.batch_size" in failed.data.tags["evalkit.failure_reason"]
    parent = next(r for r in runs if r.data.tags.get("evalkit.role") == "sweep")
    assert parent.info.status == "FAILED" and parent.data.tags["evalkit.jobs_failed"] == "1"


def test_missing_wrapper_names_what_to_install(workdir):
    proc = run_evalkit(workdir, "trainer.modules=[no_such_wrapper_pkg.engine]",
                       "trainer.requirements=['no-such-wrapper==1.0']", "trainer.name=nosuch")
    assert proc.returncode != 0
    # the trainer's requirements, the same from a checkout or a wheel (tests/unit/test_trainers.py: every message)
    assert ("'no_such_wrapper_pkg' package, which is not installed: pip install no-such-wrapper==1.0"
            in proc.stderr)
    _, (run,) = job_runs(workdir)
    assert run.info.status == "FAILED" and "no_such_wrapper_pkg" in run.data.tags["evalkit.failure_reason"]


def test_unreachable_tracking_server_is_one_clear_message(workdir):
    proc = run_evalkit(workdir, "tracking.uri=http://127.0.0.1:9", "train.max_steps=2")
    assert proc.returncode != 0
    assert "http://127.0.0.1:9 is unreachable" in proc.stderr and "Traceback" not in proc.stderr
