"""The suite's layout and tiers hold (issue 27): every test module sits where its tier and subject say, no unit
test starts a process, and every smoke or e2e test does.

Layout: `tests/unit/<package>/test_<module>[_<aspect>].py` for a module of evalkit (src/evalkit/) or of adapters/
(`tests/unit/adapters/`), `tests/smoke/test_<path>.py` and `tests/e2e/test_<path>.py` for paths through several;
SUITE names the few unit modules about the project itself rather than one module. A test's tier is its folder
(conftest.py marks it), so a module in the wrong folder runs in the wrong tier: this check is what keeps
`pytest -m "unit or smoke"` (CI) honest.

Processes are read from the source (ast), never by running the tests. A test starts a process when its body, a
fixture it requests or a function it uses (of its own module or of the shared modules at the suite's top,
followed transitively) calls a process starter of subprocess, os or multiprocessing through its module
(`subprocess.run`, `Popen`), names the `EVALKIT` command, or builds evalkit's in-process `Controller` (whose run
launches the workers). Not seen: a
starter imported bare (`from subprocess import run`), and an evalkit library call that starts a child deep inside:
STARTS_UNSEEN names those, each with the call that starts it.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from helpers import REPO, TESTS

SUBPROCESS = {"run", "Popen", "call", "check_call", "check_output", "getoutput", "getstatusoutput"}
OS = {"system", "popen", "fork", "forkpty", "posix_spawn", "posix_spawnp", "spawnl", "spawnlp", "spawnv",
      "spawnvp", "execv", "execvp", "execve"}
STARTERS = {"Popen", "Controller", "EVALKIT"}   # names that start a process wherever they appear
# Tests that start a process through an evalkit call the ast cannot follow (they belong in e2e all the same).
STARTS_UNSEEN = {
    "e2e/test_maintenance_import_cost.py::test_import_cost_of_the_fake_wrapper":
        "maintenance.imports.import_cost times each import in a fresh interpreter",
    "e2e/test_maintenance_import_cost.py::test_import_cost_says_what_is_missing_or_broken_without_raising":
        "the same, on a missing and a broken module"}
# Unit modules about the project rather than one of its modules.
SUITE = {"unit/test_suite_layout.py": "this check", "unit/test_architecture.py": "the import rules (pyproject)"}
PACKAGES = {"": REPO / "src" / "evalkit", "adapters": REPO / "adapters",
            "scripts": REPO / "scripts"}   # unit/<this>/... -> the source folder


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _starts_here(node: ast.AST) -> bool:
    """Whether this one node starts a process: a call of a process starter, or a name in STARTERS."""
    if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load):
        return _dotted(node).rpartition(".")[2] in STARTERS
    if not isinstance(node, ast.Call):
        return False
    base, _, last = _dotted(node.func).rpartition(".")
    return (base.endswith("subprocess") and last in SUBPROCESS or base == "os" and last in OS
            or ("multiprocessing" in base or base == "mp") and last in ("spawn", "Process", "start_processes"))


@dataclass
class Function:
    starts: bool                                         # its own body starts a process
    uses: set[str] = field(default_factory=set)          # names it reads: functions and helpers it may call
    fixtures: list[str] = field(default_factory=list)    # its parameters: the fixtures it requests


def functions(source: str) -> tuple[dict[str, Function], set[str]]:
    """(the module's top-level functions by name, the names that are fixtures). A class counts as one function
    made of its methods: using it may start what any of them starts (adapter_runs.AdapterRuns trains on demand)."""
    found, fixtures = {}, set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef):
            body = [n for stmt in node.body for n in ast.walk(stmt)]
            found[node.name] = Function(
                starts=any(_starts_here(n) for n in body),
                uses={_dotted(n).rpartition(".")[2] for n in body if isinstance(n, (ast.Name, ast.Attribute))})
            continue
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        body = [n for stmt in node.body for n in ast.walk(stmt)]
        found[node.name] = Function(
            starts=any(_starts_here(n) for n in body),
            uses={_dotted(n).rpartition(".")[2] for n in body if isinstance(n, (ast.Name, ast.Attribute))},
            fixtures=[a.arg for a in node.args.args])
        if any("fixture" in _dotted(d.func if isinstance(d, ast.Call) else d) for d in node.decorator_list):
            fixtures.add(node.name)
    return found, fixtures


def process_starters(sources: dict[str, str], shared: dict[str, str]) -> dict[str, bool]:
    """`path::test` -> whether it starts a process, for every test in `sources` (path -> text); `shared` holds
    the suite's shared modules (helpers.py, conftest.py, ...), whose functions and fixtures every test file may
    use."""
    common: dict[str, Function] = {}
    common_fixtures: set[str] = set()
    for text in shared.values():
        funcs, fixtures = functions(text)
        common.update(funcs)
        common_fixtures |= fixtures
    starts = {}
    for name, text in sorted(sources.items()):
        local, local_fixtures = functions(text)
        scope, fixture_names = {**common, **local}, common_fixtures | local_fixtures
        for test in local:
            if test.startswith("test_"):
                starts[f"{name}::{test}"] = _starts(test, scope, fixture_names, set())
    return starts


def _starts(name: str, scope: dict[str, Function], fixtures: set[str], seen: set[str]) -> bool:
    if name in seen or name not in scope:
        return False
    seen.add(name)
    fn = scope[name]
    return fn.starts or any(_starts(n, scope, fixtures, seen) for n in fn.uses | {f for f in fn.fixtures
                                                                                    if f in fixtures})


def tier_problems(starts: dict[str, bool], unseen: dict[str, str]) -> list[str]:
    """A unit test that starts a process, and a smoke or e2e test that starts none (it belongs in unit)."""
    problems = []
    for test, started in starts.items():
        started = started or test in unseen
        if test.startswith("unit/") and started:
            problems.append(f"{test}: starts a process; move it to tests/e2e/ (or tests/smoke/)")
        elif test.startswith(("smoke/", "e2e/")) and not started:
            problems.append(f"{test}: starts no process; move it to tests/unit/<package>/test_<module>.py")
    return problems


def _names_a_module(folder: Path, stem: str) -> bool:
    """test_<module>[_<aspect>]: some prefix of the words after test_ names a module or package in folder."""
    words = stem.removeprefix("test_").split("_")
    return any((folder / f"{'_'.join(words[:n])}.py").is_file() or (folder / "_".join(words[:n])).is_dir()
               for n in range(1, len(words) + 1))


def layout_problems(paths: list[str], suite: dict[str, str] = SUITE,
                    packages: dict[str, Path] = PACKAGES) -> list[str]:
    """Every test module (path relative to tests/) that sits outside the layout, with what is wrong."""
    problems = []
    for path in paths:
        parts = path.split("/")
        if parts[0] in ("smoke", "e2e") and len(parts) == 2 or path in suite:
            continue
        if parts[0] != "unit" or len(parts) < 2:
            problems.append(f"{path}: not under tests/unit/, tests/smoke/ or tests/e2e/")
            continue
        inner = parts[1:-1]
        top = inner[0] if inner[:1] and inner[0] in packages else ""     # adapters/, scripts/: folders of their own
        folder = packages[top].joinpath(*(inner[1:] if top else inner))
        if not _names_a_module(folder, Path(parts[-1]).stem):
            where = folder.relative_to(REPO) if folder.is_relative_to(REPO) else folder
            problems.append(f"{path}: names no module of {where} (tests/unit/<package>/test_<module>[_<aspect>].py)")
    return problems


def _suite() -> tuple[dict[str, str], dict[str, str]]:
    tests = {p.relative_to(TESTS).as_posix(): p.read_text() for p in sorted(TESTS.rglob("test_*.py"))
             if "fixtures" not in p.relative_to(TESTS).parts and "planted" not in p.relative_to(TESTS).parts}
    # the shared modules at the suite's top (helpers.py, conftest.py, quick_start_spy.py, ...): any test may use them
    return tests, {p.name: p.read_text() for p in sorted(TESTS.glob("*.py")) if not p.name.startswith("test_")}


def test_every_test_module_sits_in_the_layout():
    tests, _ = _suite()
    assert layout_problems(sorted(tests)) == []
    assert all(path in tests for path in SUITE), "SUITE names a module that is gone"


def test_every_test_sits_in_the_tier_of_what_it_starts():
    tests, shared = _suite()
    starts = process_starters(tests, shared)
    assert tier_problems(starts, STARTS_UNSEEN) == []
    assert all(test in starts for test in STARTS_UNSEEN), "STARTS_UNSEEN names a test that is gone"


def test_the_layout_check_names_each_misplaced_module(tmp_path):
    (tmp_path / "analysis").mkdir()
    (tmp_path / "analysis" / "stats.py").write_text("")
    (tmp_path / "spool.py").write_text("")
    packages = {"": tmp_path, "adapters": tmp_path / "adapters"}
    paths = ["unit/analysis/test_stats.py", "unit/analysis/test_stats_power.py", "unit/test_spool.py",
             "e2e/test_anything.py", "smoke/test_path.py",                                 # in the layout
             "test_loose.py", "unit/analysis/test_nothing.py", "unit/test_stats.py", "e2e/deep/test_x.py"]
    problems = layout_problems(paths, suite={}, packages=packages)
    assert [p.split(":")[0] for p in problems] == ["test_loose.py", "unit/analysis/test_nothing.py",
                                                   "unit/test_stats.py", "e2e/deep/test_x.py"]


def test_the_tier_check_sees_a_start_through_a_fixture_a_helper_and_a_local_function():
    shared = {"helpers.py": "import subprocess\ndef run_evalkit(d):\n    return subprocess.run(['evalkit'])\n"
                            "def run_ok(d):\n    return run_evalkit(d)\n",
              "conftest.py": "import pytest\n@pytest.fixture\ndef workdir(tmp_path):\n    return tmp_path\n"}
    source = '''
import pytest
from helpers import run_ok
@pytest.fixture
def job(workdir):
    return run_ok(workdir)
def _twice(d):
    return [run_ok(d), run_ok(d)]
def test_via_fixture(job): pass
def test_via_local_function(workdir): _twice(workdir)
def test_via_popen(): subprocess.Popen(["x"])
def test_via_os(): os.system("x")
def test_pure(workdir): assert workdir
'''
    starts = process_starters({"unit/test_x.py": source, "e2e/test_x.py": source}, shared)
    named = [p.partition(": ")[0] for p in tier_problems(starts, {})]
    assert named == ["e2e/test_x.py::test_pure", "unit/test_x.py::test_via_fixture",
                     "unit/test_x.py::test_via_local_function", "unit/test_x.py::test_via_popen",
                     "unit/test_x.py::test_via_os"]
    assert [p.partition(": ")[0] for p in tier_problems(starts, {"e2e/test_x.py::test_pure": "a call"})] == named[1:]


def test_the_tier_check_sees_a_start_inside_a_shared_class_that_a_fixture_hands_out():
    shared = {"runs.py": "from helpers import run_ok\nclass Runs:\n    def train(self, d):\n        return run_ok(d)\n",
              "helpers.py": "import subprocess\ndef run_ok(d):\n    return subprocess.run(['evalkit'])\n",
              "conftest.py": "import pytest\n@pytest.fixture\ndef runs():\n    return lambda: Runs()\n"}
    source = "def test_via_class(runs): runs().train('d')\ndef test_pure(): pass\n"
    starts = process_starters({"e2e/test_x.py": source}, shared)
    assert starts == {"e2e/test_x.py::test_pure": False, "e2e/test_x.py::test_via_class": True}


def test_the_check_reads_the_real_suite():
    """Not vacuous on the real files: it sees the known launchers start, and the judges' tests not."""
    tests, shared = _suite()
    starts = process_starters(tests, shared)
    for known in ("e2e/test_baseline_runs.py::test_ddp_trains_with_two_gloo_processes_and_logs_both_ranks_memory",
                  "e2e/test_team_server.py::test_a_job_that_ends_in_an_outage_says_how_and_evalkit_ship_records_it_once",
                  "e2e/test_config_cli.py::test_a_bad_override_is_one_line_naming_it_exit_2_and_nothing_recorded",
                  "e2e/test_config_refusals.py::test_the_warning_is_recorded_as_a_tag"):
        assert starts[known], known
    judged = [t for t in starts if t.startswith(("unit/probes/", "unit/analysis/"))]
    assert len(judged) > 100 and not any(starts[t] for t in judged)


def test_the_seconds_table_names_only_modules_that_exist():
    """conftest's order of modules: a renamed or moved module must take its seconds with it."""
    from conftest import MODULE_SECONDS

    stale = sorted(key for key in MODULE_SECONDS if not (TESTS / key).is_file())
    assert stale == [], f"conftest.MODULE_SECONDS names no module at {stale}"
    assert all(key.split("/")[0] in ("smoke", "e2e") for key in MODULE_SECONDS)
