"""The import rules of the design hold (pyproject's [tool.importlinter] contracts, checked by import-linter),
and the checker really reads evalkit's import graph: a rule the code breaks is reported broken.

import-linter runs in this process (its `lint_imports` is what the `lint-imports` command calls): it reads the
source with grimp and imports none of it."""
from __future__ import annotations

from helpers import REPO
from importlinter.cli import lint_imports


def _lint(config: str, capfd) -> tuple[int, str]:
    code = lint_imports(config_filename=config, no_cache=True)
    return code, capfd.readouterr().out


def test_the_import_rules_hold(capfd, monkeypatch):
    monkeypatch.chdir(REPO)
    code, out = _lint("pyproject.toml", capfd)
    assert code == 0, out[-3000:]
    assert "7 kept, 0 broken" in out


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
