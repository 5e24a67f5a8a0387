"""A `sqlite:///` tracking store that is not MLflow's usable database is refused in one line before anything is
recorded (issue 48): a folder, a damaged or truncated file, another program's database. Nothing is written to it."""
from __future__ import annotations

import hashlib
import sqlite3

import pytest

from evalkit.controller.tracking import MLFLOW_TABLES, TrackingUnavailable, check_reachable


def _database(path, tables, rows: int = 0) -> None:
    with sqlite3.connect(path) as db:
        for table in sorted(tables):
            db.execute(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, value TEXT)")
        for i in range(rows):
            db.execute("INSERT INTO metrics (value) VALUES (?)", ("x" * 200 + str(i),))
    db.close()


def _refusal(path) -> str:
    digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
    with pytest.raises(TrackingUnavailable) as caught:
        check_reachable(f"sqlite:///{path}")
    assert digest is None or hashlib.sha256(path.read_bytes()).hexdigest() == digest    # left untouched
    message = str(caught.value)
    assert "\n" not in message and f"sqlite:///{path}" in message
    return message


def test_an_mlflow_store_an_empty_file_and_a_new_path_are_accepted(tmp_path):
    _database(tmp_path / "mlflow.db", MLFLOW_TABLES | {"alembic_version"}, rows=50)
    (tmp_path / "empty.db").touch()
    for name in ("mlflow.db", "empty.db", "new.db"):
        check_reachable(f"sqlite:///{tmp_path / name}")


def test_a_folder_is_named_with_the_file_to_use(tmp_path):
    (tmp_path / "store").mkdir()
    message = _refusal(tmp_path / "store")
    assert "is a folder, not a database file" in message
    assert message.endswith(f"tracking.uri=sqlite:///{tmp_path / 'store' / 'mlflow.db'}")


def test_a_file_that_is_not_sqlite_or_is_truncated_is_called_damaged(tmp_path):
    (tmp_path / "notes.db").write_text("some notes, not a database\n")
    assert "is not an SQLite database (damaged, or another kind of file): restore it" in _refusal(tmp_path / "notes.db")
    _database(tmp_path / "mlflow.db", MLFLOW_TABLES, rows=400)
    data = (tmp_path / "mlflow.db").read_bytes()
    (tmp_path / "mlflow.db").write_bytes(data[: len(data) // 2])
    message = _refusal(tmp_path / "mlflow.db")
    assert f"is a truncated SQLite database ({len(data) - len(data) // 2} bytes short" in message
    assert "restore it from a backup, or point tracking.uri at another file" in message


def test_another_programs_database_is_refused_not_extended(tmp_path):
    _database(tmp_path / "mlflow.db", {"users", "orders"})
    message = _refusal(tmp_path / "mlflow.db")
    assert "is another program's SQLite database (its tables: orders, users), not MLflow's" in message
    with sqlite3.connect(tmp_path / "mlflow.db") as db:
        assert {r[0] for r in db.execute("SELECT name FROM sqlite_master")} == {"users", "orders"}
