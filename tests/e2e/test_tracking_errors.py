"""Which store a job records into, and one line (never a traceback, never a password) when that store is
unusable: at start, mid-run, for `evalkit-ship`, and for a launch or report folder that takes no files.

Read-only folders are made with chmod; root ignores permission bits, so as root the command runs under
`unshare --user` (a user namespace without privileges, where the bits bind as for anyone else).
"""
from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import time

import helpers
import pytest
from helpers import EVALKIT, job_runs, run_evalkit

from evalkit.controller import tracking
from evalkit.controller.launch.workers import free_port

TINY = ["train.max_steps=2", "task.n_train=64", "task.n_val=32", "train.val_every=0", "observe.warmup_steps=0"]
BIN = os.path.dirname(sys.executable)


def _one_line_error(proc: subprocess.CompletedProcess, *expected: str) -> str:
    """The process failed with one message line holding every `expected` text, and no traceback."""
    assert proc.returncode != 0, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if all(text in line for text in expected)]
    assert len(lines) == 1, proc.stderr[-3000:]
    return lines[0]


@pytest.fixture
def unprivileged(monkeypatch) -> list[str]:
    """The command prefix under which chmod binds; `evalkit` run through `run_evalkit` gets it too."""
    if os.geteuid() != 0:
        return []
    if subprocess.run(["unshare", "--user", "true"], capture_output=True).returncode != 0:
        pytest.skip("running as root without user namespaces: read-only folders cannot be made")
    monkeypatch.setattr(helpers, "EVALKIT", ["unshare", "--user", *EVALKIT])
    return ["unshare", "--user"]


def _read_only(*paths) -> None:
    for path in paths:
        os.chmod(path, stat.S_IRUSR | stat.S_IXUSR if os.path.isdir(path) else stat.S_IRUSR)


def _writable_again(*paths) -> None:   # so that pytest can remove tmp_path
    for path in paths:
        os.chmod(path, stat.S_IRWXU)


@pytest.fixture(scope="module")
def recorded_job(tmp_path_factory):
    """One finished job launched with MLFLOW_TRACKING_URI=env.db and tracking.uri=cfg.db on the command line:
    (workdir, completed process)."""
    workdir = tmp_path_factory.mktemp("job")
    proc = run_evalkit(workdir, *TINY, "hydra.run.dir=run", f"tracking.uri=sqlite:///{workdir}/cfg.db",
                       env={"MLFLOW_TRACKING_URI": f"sqlite:///{workdir}/env.db"})
    return workdir, proc


# --- item 8 -------------------------------------------------------------------------------------------------

def test_command_line_tracking_uri_beats_the_environment_and_is_the_recorded_param(recorded_job):
    workdir, proc = recorded_job
    helpers.ok(proc)
    assert not (workdir / "env.db").exists()
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{workdir}/cfg.db")
    (run,) = client.search_runs([client.get_experiment_by_name("evalkit").experiment_id])
    assert run.info.status == "FINISHED"
    assert run.data.params["tracking.uri"] == f"sqlite:///{workdir}/cfg.db"


# --- item 9 -------------------------------------------------------------------------------------------------

def test_ship_to_an_unreachable_or_wrong_store_is_one_line_at_once(recorded_job):
    workdir, proc = recorded_job
    helpers.ok(proc)
    started = time.monotonic()
    proc = subprocess.run([os.path.join(BIN, "evalkit-ship"), str(workdir / "run"),
                           "--tracking-uri", f"http://127.0.0.1:{free_port()}"], capture_output=True, text=True,
                          timeout=120)
    assert time.monotonic() - started < 60          # was 250 s of MLflow retries, then a traceback
    _one_line_error(proc, "is unreachable", "start it")
    from evalkit.controller.job.ship import reship

    with pytest.raises(tracking.TrackingUnavailable, match="cannot read run .*give --tracking-uri the store") as err:
        reship(str(workdir / "run"), f"sqlite:///{workdir}/other.db")
    assert f"the job recorded into sqlite:///{workdir}/cfg.db" in str(err.value)


# --- item 11 ------------------------------------------------------------------------------------------------

def test_unusable_tracking_uris_are_one_line_before_training(tmp_path, unprivileged):
    not_mlflow = subprocess.Popen([sys.executable, "-m", "http.server", str(port := free_port()),
                                   "--bind", "127.0.0.1"], cwd=tmp_path,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    (tmp_path / "ro").mkdir()
    _read_only(tmp_path / "ro")
    cases = {
        "foo://bar": ("MLflow knows no store of scheme 'foo'", "sqlite:///"),
        f"http://bob:s3cret@127.0.0.1:{port}": ("bob:***@", "is not an MLflow tracking server", "GET /health"),
        f"sqlite:///{tmp_path}/ro/mlflow.db": ("takes no writes", f"{tmp_path}/ro: Permission denied"),
    }
    try:
        time.sleep(0.5)   # the http.server's socket
        for uri, expected in cases.items():
            proc = run_evalkit(tmp_path, *TINY, f"tracking.uri={uri}", "hydra.run.dir=run")
            _one_line_error(proc, *expected)
            assert "s3cret" not in proc.stderr + proc.stdout
            assert not (tmp_path / "run" / "spool").exists()      # refused before anything trained
    finally:
        not_mlflow.kill()
        _writable_again(tmp_path / "ro")


def test_read_only_sqlite_file_and_masked_uris(tmp_path, unprivileged):
    db = tmp_path / "mlflow.db"
    db.write_bytes(b"")
    _read_only(db)
    code = ("import sys\nfrom evalkit.controller import tracking\n"
            "try:\n    tracking.check_reachable('sqlite:///' + sys.argv[1])\n"
            "except tracking.TrackingUnavailable as exc:\n    print(exc)")
    proc = subprocess.run([*unprivileged, sys.executable, "-c", code, str(db)], capture_output=True, text=True)
    assert f"takes no writes ({db}: Permission denied" in proc.stdout, proc.stdout + proc.stderr
    _writable_again(db)
    assert tracking.display_uri("see http://bob:p@ss@h:5000/x and postgresql://u:pw@db/x, sqlite:////a") == \
        "see http://bob:***@h:5000/x and postgresql://u:***@db/x, sqlite:////a"


# --- item 12 ------------------------------------------------------------------------------------------------

def test_read_only_launch_directory_is_one_line_unless_nothing_goes_there(tmp_path, unprivileged):
    launch, elsewhere = tmp_path / "launch", tmp_path / "elsewhere"
    launch.mkdir()
    elsewhere.mkdir()
    _read_only(launch)
    try:
        line = _one_line_error(run_evalkit(launch, *TINY), "cannot create the run directory")
        assert f"({launch}: Permission denied)" in line and "run evalkit from a writable directory" in line
        helpers.ok(run_evalkit(launch, *TINY, f"hydra.run.dir={elsewhere}/run",
                                f"tracking.uri=sqlite:///{elsewhere}/mlflow.db"))
        assert os.listdir(launch) == []
        (run,) = job_runs(elsewhere)[1]
        assert run.info.status == "FINISHED"

        proc = subprocess.run([*unprivileged, os.path.join(BIN, "evalkit-verdict"), "--out", str(launch / "report"),
                               "--tracking-uri", f"http://127.0.0.1:{free_port()}"],
                              capture_output=True, text=True, timeout=120)
        _one_line_error(proc, f"--out {launch}/report: cannot write the report there ({launch}: Permission denied)")
        assert "unreachable" not in proc.stderr       # checked before any run is read
    finally:
        _writable_again(launch)


# --- item 13 ------------------------------------------------------------------------------------------------

def test_store_turning_read_only_mid_run_is_one_line_per_failure_and_one_hint(tmp_path, unprivileged):
    store = tmp_path / "store"
    store.mkdir()
    job = subprocess.Popen([*helpers.EVALKIT, *TINY, "train.max_steps=8", "hydra.run.dir=run",
                            "tracking.flush_interval_s=0.2", "tracking.progress_interval_s=1000",
                            f"tracking.uri=sqlite:///{store}/mlflow.db"], cwd=tmp_path,
                           env={k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"},
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 180
        while not (tmp_path / "run" / "run.json").exists() and job.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        _read_only(store / "mlflow.db", store)       # the run exists; every step is shipped after this
        _, stderr = job.communicate(timeout=300)
    finally:
        _writable_again(store, store / "mlflow.db")
    assert job.returncode != 0
    assert "Traceback" not in stderr and "sqlalchemy" not in stderr.lower(), stderr[-3000:]
    # SQLite says "attempt to write a readonly database", or "disk I/O error" when the switch lands inside a
    # write and its rollback journal cannot be removed (seen in CI): one line for each kind's first failure,
    # then one final line.
    lines = stderr.splitlines()
    retried = [re.search(r"failed \((.+?)\): records stay in .* and sending is retried$", line)
               for line in lines if line.startswith("[evalkit] tracking store")]
    kinds = [match.group(1) for match in retried if match]
    assert len(kinds) == len(retried) == len(set(kinds)) >= 1, stderr
    assert all(kind in ("OperationalError: attempt to write a readonly database", "OperationalError: disk I/O error")
               for kind in kinds), stderr
    assert len([line for line in lines if line.startswith("evalkit: the tracking store")]) == 1, stderr
    assert stderr.count(f"evalkit-ship {tmp_path / 'run'}") == 1
    assert len(stderr.splitlines()) <= 8, stderr


def test_a_store_failing_as_training_starts_does_not_stop_the_job_and_its_tags_follow(tmp_path, monkeypatch):
    """The store failed between run.json and the run's folder tags (a read-only store, a server restarting):
    the controller raised a traceback before any worker started. Now training goes on and the tags are set when
    the run ends. The failure is planted on that one call, in the controller's own process."""
    from helpers import compose_config
    from mlflow.tracking import MlflowClient

    from evalkit.controller.job.run import Controller
    from evalkit.names import RUN_DIR

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    ctl = Controller(compose_config(*TINY, "train.max_steps=4", "tracking.flush_interval_s=0.2"), str(tmp_path / "run"),
                     uri=uri)
    ctl.start_run()
    set_tags, failed = tracking.set_tags, []

    def fails_once_on_the_folder_tags(client, run_id, tags):
        if RUN_DIR in tags and not failed:
            failed.append(tags)
            raise RuntimeError("(sqlite3.OperationalError) attempt to write a readonly database")
        return set_tags(client, run_id, tags)

    monkeypatch.setattr(tracking, "set_tags", fails_once_on_the_folder_tags)
    result = ctl.train()
    assert failed and result.ok and result.status == "FINISHED", result
    run = MlflowClient(uri).get_run(ctl.run_id)
    assert run.data.tags[RUN_DIR] == str(tmp_path / "run")
    assert [m.step for m in MlflowClient(uri).get_metric_history(ctl.run_id, "train/loss")] == [1, 2, 3, 4]
