"""The import rules of the design hold (pyproject's [tool.importlinter] contracts, checked by import-linter),
and the checker really reads evalkit's import graph: a rule the code breaks is reported broken."""
from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINT = os.path.join(os.path.dirname(sys.executable), "lint-imports")


def _lint(config: str, cwd: str) -> subprocess.CompletedProcess:
    return subprocess.run([LINT, "--no-cache", config], cwd=cwd, capture_output=True, text=True, timeout=300)


def test_the_import_rules_hold():
    proc = _lint("pyproject.toml", ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "7 kept, 0 broken" in proc.stdout


def test_a_rule_the_code_breaks_is_reported(tmp_path):
    """The controller does talk to MLflow: forbidding it must break (the checker is not vacuous)."""
    (tmp_path / "contracts.toml").write_text(
        '[tool.importlinter]\nroot_packages = ["evalkit"]\ninclude_external_packages = true\n\n'
        '[[tool.importlinter.contracts]]\nname = "the controller never imports mlflow (false)"\ntype = "forbidden"\n'
        'source_modules = ["evalkit.controller"]\nforbidden_modules = ["mlflow"]\n')
    proc = _lint(str(tmp_path / "contracts.toml"), str(tmp_path))
    assert proc.returncode == 1 and "BROKEN" in proc.stdout
    assert "evalkit.controller.tracking -> mlflow" in proc.stdout
