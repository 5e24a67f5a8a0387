"""evalkit installs beside a team's stack (issue 45): pyproject states ranges, so installing evalkit into a venv
that already holds torch 2.13.0 and the wrappers changes none of them, and the tested versions come from
constraints.txt, which pins exactly what this venv holds. pip's own resolver answers (`--dry-run --report`)."""
from __future__ import annotations

import json
import subprocess
import sys

from helpers import TESTS

REPO = TESTS.parent


def _would_install(tmp_path, *args: str) -> dict[str, str]:
    report = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-build-isolation", "--report",
                           str(report), *args], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {i["metadata"]["name"]: i["metadata"]["version"] for i in json.loads(report.read_text())["install"]}


def test_installing_evalkit_beside_torch_and_the_wrappers_keeps_them(tmp_path):
    import torch

    assert torch.__version__.startswith("2.13.0")
    assert _would_install(tmp_path, "-e", ".[all]") == {"evalkit": "0.1.0"}


def test_the_constraints_pin_what_the_tested_venv_holds(tmp_path):
    assert _would_install(tmp_path, "-c", "constraints.txt", "-e", ".[all,dev]") == {"evalkit": "0.1.0"}
