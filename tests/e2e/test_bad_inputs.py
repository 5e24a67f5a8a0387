"""Nothing recorded may be wrong, part two (issue 48): careless and unlucky inputs, each through the real command.
Every case asserts the exit code, the words of its one line, and what the store holds afterwards."""
from __future__ import annotations

import os
import sqlite3
import subprocess
import sys

from helpers import EVALKIT, PLANTED, job_runs, run_evalkit

from evalkit import names

TINY = ["task.n_train=64", "task.n_val=32", "train.batch_size=8", "train.val_every=0", "train.max_steps=6"]
SHORT = {"PYTHONPATH": str(PLANTED)}      # tests/planted/short_loop.py


def _short(workdir, adapter: str):
    proc = run_evalkit(workdir, *TINY, f"trainer._target_=short_loop.{adapter}", "trainer.name=short", env=SHORT)
    _, (run,) = job_runs(workdir)
    return proc, run


def test_an_adapter_that_never_trains_fails_its_run_naming_the_steps(workdir):
    proc, run = _short(workdir, "ReturnsAtOnce")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert run.info.status == "FAILED"
    assert run.data.tags[names.FAILURE_REASON].startswith("trained 0 of 6 optimizer steps: ")
    assert "trained 0 of 6 optimizer steps" in proc.stderr


def test_an_adapter_that_stops_early_without_a_word_fails_and_one_that_says_why_finishes(workdir):
    proc, run = _short(workdir, "StopsEarly")
    assert proc.returncode != 0 and run.info.status == "FAILED"
    assert run.data.tags[names.FAILURE_REASON].startswith("trained 3 of 6 optimizer steps: ")
    declared = workdir / "declared"
    declared.mkdir()
    proc, run = _short(declared, "StopsEarlyDeclared")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert run.info.status == "FINISHED"
    assert run.data.tags[names.ENDED_BY] == "its stop callback, asked for at step 3"
    assert "3 steps of 6, stopped early by its stop callback" in run.data.tags[names.MLFLOW_NOTE]


def test_sys_exit_from_an_adapter_is_named_with_its_step(workdir):
    proc, run = _short(workdir, "ExitsAtTwo")
    assert proc.returncode != 0 and run.info.status == "FAILED"
    assert "the adapter exited the process with sys.exit(0) at step 2 of 6" in run.data.tags[names.FAILURE_REASON]


def test_a_misspelled_adapter_option_is_refused_before_anything_is_recorded(workdir):
    proc = run_evalkit(workdir, "trainer=ignite", "+trainer.options.gradient_acumulation=4", *TINY)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert ("evalkit: invalid config: trainer.options.gradient_acumulation is not an option of IgniteAdapter (it "
            "would be ignored): remove it (it takes no options)") in proc.stderr
    runs = job_runs(workdir)[1] if (workdir / "mlflow.db").exists() else []
    assert [r for r in runs if r.info.status == "FINISHED"] == []


def _evalkit(cwd, *overrides: str, multirun: bool = False) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "EVALKIT_DEFAULT_TRACKING_URI")}
    return subprocess.run([*EVALKIT, *(["-m"] if multirun else []), *overrides, "tracking.progress_interval_s=1000"],
                          cwd=cwd, capture_output=True, text=True, env=env, timeout=300)


def _first_line(proc) -> str:
    return next(line for line in proc.stderr.splitlines() if line.startswith("evalkit"))


def test_a_deleted_working_directory_is_one_line(workdir):
    gone = workdir / "gone"
    gone.mkdir()
    code = (f"import os, subprocess, sys; os.chdir({str(gone)!r}); os.rmdir({str(gone)!r}); "
            f"p = subprocess.run({[*EVALKIT, 'train.max_steps=2']!r}, capture_output=True, text=True); "
            "sys.stderr.write(p.stderr); sys.exit(p.returncode)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.stderr.strip() == ("evalkit: the working directory no longer exists (it was deleted or moved while "
                                   "this shell was in it): cd to an existing folder (e.g. cd ~) and run the command "
                                   "again")


def test_a_sweep_against_a_server_that_is_down_says_so_once(workdir):
    proc = _evalkit(workdir, "seed=0,1", "tracking=server", "tracking.uri=http://127.0.0.1:9", *TINY, multirun=True)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr and "UserWarning" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("evalkit")]
    assert lines == ["evalkit: MLflow tracking server http://127.0.0.1:9 is unreachable ([Errno 111] Connection "
                     "refused): start it (mlflow server ...), fix tracking.uri / MLFLOW_TRACKING_URI, or unset both to "
                     "use the local store ./mlflow.db"], proc.stderr[-3000:]


def test_a_damaged_store_a_foreign_database_and_a_folder_are_refused_untouched(workdir):
    ok = run_evalkit(workdir, *TINY)
    assert ok.returncode == 0, ok.stderr[-3000:]
    data = (workdir / "mlflow.db").read_bytes()
    (workdir / "mlflow.db").write_bytes(data[: len(data) // 3])
    proc = _evalkit(workdir, *TINY)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "is a truncated SQLite database" in _first_line(proc) and "restore it from a backup" in _first_line(proc)
    assert (workdir / "mlflow.db").read_bytes() == data[: len(data) // 3]

    foreign = workdir / "theirs"
    foreign.mkdir()
    with sqlite3.connect(foreign / "mlflow.db") as db:
        db.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY)")
    db.close()
    proc = _evalkit(foreign, *TINY)
    assert proc.returncode != 0 and "is another program's SQLite database (its tables: invoices)" in _first_line(proc)
    with sqlite3.connect(foreign / "mlflow.db") as db:
        assert [r[0] for r in db.execute("SELECT name FROM sqlite_master")] == ["invoices"]

    proc = _evalkit(workdir, *TINY, f"tracking.uri=sqlite:///{foreign}")
    assert proc.returncode != 0 and "is a folder, not a database file" in _first_line(proc)


def test_a_text_file_given_as_resume_from_is_not_called_corrupt(workdir):
    notes = workdir / "notes.txt"
    notes.write_text("step 5\n")
    proc = run_evalkit(workdir, *TINY, f"resume_from={notes}")
    assert proc.returncode != 0 and notes.exists()
    _, (run,) = job_runs(workdir)
    reason = run.data.tags[names.FAILURE_REASON]
    assert f"{notes} is not a checkpoint (not a file torch.save writes)" in reason and "delete" not in reason
