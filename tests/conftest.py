"""Fixtures and the environment every test runs in; the shared helpers live in helpers.py."""
from __future__ import annotations

import fcntl
import os

import pytest

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")


@pytest.fixture
def workdir(tmp_path):
    return tmp_path


# ------------------------------------------------------------------ timed tests run alone
# Tests that time something (the performance probe) must not share the 2 cores with the other pytest-xdist
# worker. Every other test holds a shared lock while it runs; a timed module takes the lock exclusively for its
# whole duration. Writers first: a timed module announces itself on the intent lock, so new tests wait for it
# instead of starving it.
def _lock_paths(tmp_path_factory) -> tuple[str, str]:
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    return str(root / "evalkit-machine.lock"), str(root / "evalkit-machine.intent")


@pytest.fixture(autouse=True)
def _shares_the_machine(request, tmp_path_factory):
    if "machine_alone" in request.fixturenames:
        yield
        return
    machine, intent = _lock_paths(tmp_path_factory)
    with open(intent, "a") as gate:
        fcntl.flock(gate, fcntl.LOCK_SH)
        fcntl.flock(gate, fcntl.LOCK_UN)
    with open(machine, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_SH)
        yield


@pytest.fixture(scope="module")
def machine_alone(tmp_path_factory):
    """Nothing else of the test session runs while the requesting module runs."""
    machine, intent = _lock_paths(tmp_path_factory)
    with open(intent, "a") as gate, open(machine, "a") as lock:
        fcntl.flock(gate, fcntl.LOCK_EX)
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield
