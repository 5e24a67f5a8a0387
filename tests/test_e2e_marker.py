"""Every test that starts a process is marked `e2e`, so `pytest -m "not e2e"` runs only in-process tests.

Read from the source (ast), never by running the tests. A test starts a process when its body, a fixture it
requests or a function it uses (of its own module or of helpers.py, followed transitively) calls a process
starter of subprocess, os or multiprocessing through its module (`subprocess.run`, `Popen`), names the `EVALKIT`
command, or builds evalkit's in-process `Controller` (whose run launches the workers). Not seen: a starter
imported bare (`from subprocess import run`), and an evalkit library call that starts a child deep inside
(`quick.main` runs the sweep as a child unless it refuses its arguments first): mark such a test by hand.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

TESTS = Path(__file__).resolve().parent
SUBPROCESS = {"run", "Popen", "call", "check_call", "check_output", "getoutput", "getstatusoutput"}
OS = {"system", "popen", "fork", "forkpty", "posix_spawn", "posix_spawnp", "spawnl", "spawnlp", "spawnv",
      "spawnvp", "execv", "execvp", "execve"}
STARTERS = {"Popen", "Controller", "EVALKIT"}   # names that start a process wherever they appear
# Tests that start a process evalkit has no part in and that take well under a second.
NOT_E2E = {"test_architecture.py::test_the_import_rules_hold": "lint-imports reads the source, runs none of it",
           "test_architecture.py::test_a_rule_the_code_breaks_is_reported": "the same, on a rule the code breaks"}


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
    e2e: bool = False                                    # marked @pytest.mark.e2e


def _is_e2e(marks: ast.AST) -> bool:
    return any(_dotted(n) == "pytest.mark.e2e" for n in ast.walk(marks))


def functions(source: str) -> tuple[dict[str, Function], set[str], bool]:
    """(the module's top-level functions by name, the names that are fixtures, whether the module is e2e)."""
    tree = ast.parse(source)
    found, fixtures, module_e2e = {}, set(), False
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(_dotted(t) == "pytestmark" for t in node.targets):
            module_e2e = _is_e2e(node.value)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        body = [n for stmt in node.body for n in ast.walk(stmt)]
        found[node.name] = Function(
            starts=any(_starts_here(n) for n in body),
            uses={_dotted(n).rpartition(".")[2] for n in body if isinstance(n, (ast.Name, ast.Attribute))},
            fixtures=[a.arg for a in node.args.args],
            e2e=any(_is_e2e(d) for d in node.decorator_list))
        if any("fixture" in _dotted(d.func if isinstance(d, ast.Call) else d) for d in node.decorator_list):
            fixtures.add(node.name)
    return found, fixtures, module_e2e


def unmarked_starters(sources: dict[str, str], shared: dict[str, str]) -> list[str]:
    """`file::test` of every test in `sources` (file name -> text) that starts a process and is not marked e2e;
    `shared` holds helpers.py and conftest.py, whose functions and fixtures every test file may use."""
    common: dict[str, Function] = {}
    common_fixtures: set[str] = set()
    for text in shared.values():
        funcs, fixtures, _ = functions(text)
        common.update(funcs)
        common_fixtures |= fixtures
    offenders = []
    for name, text in sorted(sources.items()):
        local, local_fixtures, module_e2e = functions(text)
        scope, fixture_names = {**common, **local}, common_fixtures | local_fixtures
        for test, fn in local.items():
            if (test.startswith("test_") and not (module_e2e or fn.e2e) and f"{name}::{test}" not in NOT_E2E
                    and _starts(test, scope, fixture_names, set())):
                offenders.append(f"{name}::{test}")
    return offenders


def _starts(name: str, scope: dict[str, Function], fixtures: set[str], seen: set[str]) -> bool:
    if name in seen or name not in scope:
        return False
    seen.add(name)
    fn = scope[name]
    return fn.starts or any(_starts(n, scope, fixtures, seen) for n in fn.uses | {f for f in fn.fixtures
                                                                                    if f in fixtures})


def _suite() -> tuple[dict[str, str], dict[str, str]]:
    tests = {p.name: p.read_text() for p in sorted(TESTS.glob("test_*.py"))}
    return tests, {p.name: p.read_text() for p in (TESTS / "helpers.py", TESTS / "conftest.py")}


def test_every_test_that_starts_a_process_is_marked_e2e():
    tests, shared = _suite()
    assert unmarked_starters(tests, shared) == [], "mark these @pytest.mark.e2e (or the module: pytestmark)"
    for exempt in NOT_E2E:          # an exemption outlives no test
        name, _, test = exempt.partition("::")
        assert name in tests and test in functions(tests[name])[0], f"NOT_E2E names no test: {exempt}"


def test_the_check_sees_a_start_through_a_fixture_a_helper_and_a_local_function():
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
@pytest.mark.e2e
def test_marked(job): pass
def test_pure(workdir): assert workdir
'''
    assert unmarked_starters({"test_x.py": source}, shared) == [
        "test_x.py::test_via_fixture", "test_x.py::test_via_local_function", "test_x.py::test_via_popen",
        "test_x.py::test_via_os"]
    marked = "import pytest\npytestmark = pytest.mark.e2e\n" + source
    assert unmarked_starters({"test_x.py": marked}, shared) == []


def test_the_check_reads_the_real_suite():
    """Not vacuous on the real files: with every marker removed it finds the known launchers."""
    tests, shared = _suite()
    unmarked = {name: text.replace("pytest.mark.e2e", "pytest.mark.other") for name, text in tests.items()}
    found = unmarked_starters(unmarked, shared)
    for known in ("test_baseline_runs.py::test_ddp_trains_with_two_gloo_processes_and_logs_both_ranks_memory",
                  "test_team_server.py::test_a_job_that_ends_in_an_outage_says_how_and_evalkit_ship_records_it_once",
                  "test_config.py::test_a_bad_override_is_one_line_naming_it_exit_2_and_nothing_recorded",
                  "test_config_validation.py::test_the_warning_is_recorded_as_a_tag"):
        assert known in found
    assert not any(name.startswith(("test_analysis_", "test_units.py")) for name in found)
