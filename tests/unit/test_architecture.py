"""The import rules of the design hold (pyproject's [tool.importlinter] contracts, checked by import-linter),
and the checker really reads evalkit's import graph: a rule the code breaks is reported broken, and an import
circle in the controller or the probes (a layers contract each, and the acyclic catch-all) fails.

import-linter runs in this process (its `lint_imports` is what the `lint-imports` command calls): it reads the
source with grimp and imports none of it."""
from __future__ import annotations

import json
import re
import shutil
import tomllib

import pytest
from helpers import REPO
from importlinter.cli import lint_imports

PLANTED = "evalkit_planted"     # a copy of evalkit's source under another name, circles planted in it
# (module of the copy, the import planted in it, what lint-imports then says): each plant closes a circle.
CIRCLES = [
    ("controller/job/nodes.py", "from evalkit_planted.controller.job.run import JobResult",
     "evalkit_planted.controller.job.nodes is not allowed to import evalkit_planted.controller.job.run"),
    ("controller/job/run.py", "from evalkit_planted.controller.sweep.callback import SweepCallback",
     "evalkit_planted.controller.job is not allowed to import evalkit_planted.controller.sweep"),
    ("controller/sweep/callback.py", "from evalkit_planted.controller.ship.sweep import finish_sweeps",
     "evalkit_planted.controller.sweep is not allowed to import evalkit_planted.controller.ship"),
    ("probes/maintenance/plan.py", "from evalkit_planted.probes.maintenance.judge import judge",
     "evalkit_planted.probes.maintenance.plan is not allowed to import evalkit_planted.probes.maintenance.judge"),
    ("probes/consistency/plan.py", "from evalkit_planted.probes.functional import plan",
     "evalkit_planted.probes.consistency is not allowed to import evalkit_planted.probes.functional"),
]


def _lint(config: str, capfd) -> tuple[int, str]:
    """lint-imports' exit code and its report, its lines unwrapped (it wraps them at 80 columns)."""
    code = lint_imports(config_filename=config, no_cache=True)
    return code, " ".join(capfd.readouterr().out.split())


def _contracts() -> list[dict]:
    with open(REPO / "pyproject.toml", "rb") as fh:
        return tomllib.load(fh)["tool"]["importlinter"]["contracts"]


def test_the_import_rules_hold(capfd, monkeypatch):
    monkeypatch.chdir(REPO)
    code, out = _lint("pyproject.toml", capfd)
    assert code == 0, out[-3000:]
    assert f"{len(_contracts())} kept, 0 broken" in out     # every contract of pyproject ran and held


def _circle_contracts(package: str) -> str:
    """pyproject's contracts about the controller's and the probes' layers and circles, for `package` (a copy)."""
    kept = [c for c in _contracts() if c["type"] in ("layers", "acyclic_siblings")]
    out = f'[tool.importlinter]\nroot_packages = ["{package}"]\n'
    for contract in kept:
        out += "\n[[tool.importlinter.contracts]]\n"
        for key, value in contract.items():
            if key in ("containers", "ancestors"):
                value = [re.sub(r"^evalkit\b", package, v) for v in value]
            out += f"{key} = {json.dumps(value)}\n"
    return out


def _planted_copy(tmp_path, monkeypatch, plants: list[tuple[str, str]]) -> str:
    """evalkit's source copied as PLANTED (its imports renamed), each (module, import) appended; the config."""
    copy = tmp_path / PLANTED
    shutil.copytree(REPO / "src" / "evalkit", copy, ignore=shutil.ignore_patterns("__pycache__", "conf"))
    for path in copy.rglob("*.py"):
        text = re.sub(r"\b(from|import) evalkit\b", rf"\1 {PLANTED}", path.read_text())
        path.write_text(text)
    for module, line in plants:
        path = copy / module
        path.parent.mkdir(exist_ok=True)
        path.write_text((path.read_text() if path.exists() else "") + f"\n{line}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    config = tmp_path / "contracts.toml"
    config.write_text(_circle_contracts(PLANTED))
    return str(config)


def test_the_circle_contracts_hold_on_a_faithful_copy(tmp_path, capfd, monkeypatch):
    """The copy the next test plants circles in is evalkit's graph: unplanted, every contract holds."""
    config = _planted_copy(tmp_path, monkeypatch, [])
    monkeypatch.chdir(tmp_path)
    code, out = _lint(config, capfd)
    assert code == 0, out[-3000:]
    assert "BROKEN" not in out and "kept, 0 broken" in out


@pytest.mark.parametrize("module, line, said", CIRCLES, ids=[c[0] for c in CIRCLES])
def test_an_import_circle_in_the_controller_or_the_probes_is_reported(tmp_path, capfd, monkeypatch, module, line,
                                                                      said):
    config = _planted_copy(tmp_path, monkeypatch, [(module, line)])
    monkeypatch.chdir(tmp_path)
    code, out = _lint(config, capfd)
    assert code == 1 and said in out, out[-3000:]


def test_a_circle_in_a_new_probe_package_is_reported_named_in_the_layers_or_not(tmp_path, capfd, monkeypatch):
    """A new probe (one package, listed nowhere): its probe below its judge breaks the probe layers; two modules
    of names no contract lists, importing each other, break the acyclic catch-all."""
    config = _planted_copy(tmp_path, monkeypatch, [
        ("probes/newprobe/__init__.py", '"""A probe added later."""'),
        ("probes/newprobe/probe.py", f"from {PLANTED}.probes.newprobe import judge"),
        ("probes/newprobe/judge.py", f"from {PLANTED}.probes.newprobe import probe"),
        ("probes/newprobe/fit.py", f"from {PLANTED}.probes.newprobe import tally"),
        ("probes/newprobe/tally.py", f"from {PLANTED}.probes.newprobe import fit")])
    monkeypatch.chdir(tmp_path)
    code, out = _lint(config, capfd)
    assert code == 1
    assert f"{PLANTED}.probes.newprobe.judge is not allowed to import {PLANTED}.probes.newprobe.probe" in out
    assert f"No cycles are allowed in {PLANTED}.probes.newprobe." in out, out[-3000:]
    assert ".fit -> .tally" in out or ".tally -> .fit" in out, out[-3000:]


def test_a_rule_the_code_breaks_is_reported(tmp_path, capfd, monkeypatch):
    """The controller does talk to MLflow: forbidding it must break (the checker is not vacuous)."""
    (tmp_path / "contracts.toml").write_text(
        '[tool.importlinter]\nroot_packages = ["evalkit"]\ninclude_external_packages = true\n\n'
        '[[tool.importlinter.contracts]]\nname = "the controller never imports mlflow (false)"\ntype = "forbidden"\n'
        'source_modules = ["evalkit.controller"]\nforbidden_modules = ["mlflow"]\n')
    monkeypatch.chdir(tmp_path)
    code, out = _lint(str(tmp_path / "contracts.toml"), capfd)
    assert code == 1 and "BROKEN" in out
    assert "evalkit.controller.tracking -> mlflow" in out


def core_imports_of_adapters(root) -> list[str]:
    """Each `import evalkit.adapters...` / `from evalkit.adapters... import` under `root` (src/evalkit): adapters/
    installs as evalkit.adapters from a folder of its own, which import-linter's graph of src/evalkit does not see."""
    import ast

    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            found += [f"{path.relative_to(root)}: {n}" for n in names if n == "evalkit.adapters"
                      or n.startswith("evalkit.adapters.")]
    return found


def test_evalkits_core_never_imports_the_adapters():
    assert core_imports_of_adapters(REPO / "src" / "evalkit") == []


def test_an_import_of_the_adapters_from_the_core_is_found(tmp_path):
    (tmp_path / "sneaky.py").write_text("import os\nfrom evalkit.adapters.baseline import BaselineAdapter\n")
    assert core_imports_of_adapters(tmp_path) == ["sneaky.py: evalkit.adapters.baseline"]


def test_every_bundled_wrapper_is_in_every_rule_that_keeps_wrappers_out():
    """A contract that forbids the wrappers names each bundled trainer's (the top-level packages its YAML's
    `modules` lists): a wrapper added later is kept out too, or this fails naming it."""
    import yaml

    wrappers = {m.split(".")[0] for path in (REPO / "src" / "evalkit" / "conf" / "trainer").glob("*.yaml")
                for m in yaml.safe_load(path.read_text()).get("modules") or []}
    assert {"lightning", "poutyne"} <= wrappers
    keeping_out = [c for c in _contracts() if c["type"] == "forbidden" and "lightning" in c["forbidden_modules"]]
    assert len(keeping_out) == 3
    for contract in keeping_out:
        assert wrappers <= set(contract["forbidden_modules"]), (contract["name"], wrappers - set(
            contract["forbidden_modules"]))
