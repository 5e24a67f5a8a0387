"""Fixtures and the environment every test runs in; the shared helpers live in helpers.py."""
from __future__ import annotations

import contextlib
import fcntl
import os

import pytest

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
# The tests that train in pytest's own process, as evalkit's workers do: OpenMP threads that sleep while they
# wait, not spin on the cores the other xdist worker is using (before anything here imports torch).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


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


@contextlib.contextmanager
def _sharing(tmp_path_factory):
    machine, intent = _lock_paths(tmp_path_factory)
    with open(intent, "a") as gate:
        fcntl.flock(gate, fcntl.LOCK_SH)
        fcntl.flock(gate, fcntl.LOCK_UN)
    with open(machine, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_SH)
        yield


@pytest.fixture(autouse=True)
def _shares_the_machine(request, tmp_path_factory):
    if "machine_alone" in request.fixturenames:
        yield
        return
    with _sharing(tmp_path_factory):
        yield


_module_setups = [0]    # module fixtures being set up in this process (one holds the lock for those inside it)


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef, request):
    """A module's fixtures are set up before any test's lock (a sweep its tests share, a server): that work
    holds the shared lock too, or it could overlap a timed module (CI once saw the performance probe's added cost
    36 % above the planted one)."""
    shares = fixturedef.scope == "module" and _module_setups[0] == 0 and fixturedef.argname != "machine_alone" \
        and "machine_alone" not in fixturedef.argnames
    if not shares:
        yield
        return
    _module_setups[0] += 1
    try:
        with _sharing(request.getfixturevalue("tmp_path_factory")):
            yield
    finally:
        _module_setups[0] -= 1


@pytest.fixture(scope="module")
def machine_alone(tmp_path_factory):
    """Nothing else of the test session runs while the requesting module runs."""
    machine, intent = _lock_paths(tmp_path_factory)
    with open(intent, "a") as gate, open(machine, "a") as lock:
        fcntl.flock(gate, fcntl.LOCK_EX)
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


# ------------------------------------------------------------------ the longest modules first
# pytest-xdist (`--dist loadscope --no-loadscope-reorder`, pyproject.toml) hands out whole modules in collection
# order. Longest first, the two workers end within a short module of each other; in xdist's own order (most tests
# first) a long module with few tests could start last and run alone. Seconds one module took in a `pytest -n 2`
# run of the whole suite on the 2-core machine (2026-12-02); a module not listed counts as short.
MODULE_SECONDS = {
    "test_team_server.py": 378, "test_probe_semantics.py": 251, "test_adapter_lightning.py": 171,
    "test_run_integrity.py": 167, "test_adapter_fabric.py": 147, "test_probe_semantics_wrappers.py": 139,
    "test_adapter_accelerate.py": 127, "test_probe_stability.py": 126, "test_adapter_ignite.py": 114,
    "test_entry_points.py": 113, "test_adapter_hf_trainer.py": 104, "test_ui_records.py": 93,
    "test_baseline_runs.py": 90, "test_failures_and_tracking.py": 89, "test_resume_and_secrets.py": 69,
    "test_probe_performance.py": 115, "test_probe_functional.py": 65, "test_verdict_diverging_sweep.py": 58,
    "test_tracking_errors.py": 55, "test_spool_full.py": 47, "test_multinode.py": 46, "test_probe_consistency.py": 45,
    "test_matrix.py": 42, "test_probe_maintenance.py": 39, "test_config_validation.py": 38, "test_submitit.py": 38,
    "test_probe_customization.py": 36, "test_sweep_resume.py": 35, "test_launchers.py": 34,
    "test_cuda.py": 23, "test_sweep_reship.py": 155,
}


def pytest_collection_modifyitems(items):
    # A stable sort: the tests of a module keep their order, and so do the short modules.
    items.sort(key=lambda item: -MODULE_SECONDS.get(item.path.name, 0))
