"""evalkit-eval gates CI in one line (issue 45): --fail-on is checked before anything trains, the gate's exit code
is 3, and junit.xml and summary.md lie beside the report, readable by a JUnit parser; --help lists the exit codes."""
from __future__ import annotations

import os
import subprocess
import sys

from junitparser import Failure, JUnitXml

from evalkit.probes.catalog import dimension_names

BIN = os.path.dirname(sys.executable)


def _run(workdir, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "EVALKIT_DEFAULT_TRACKING_URI")}
    return subprocess.run([os.path.join(BIN, "evalkit-eval"), *args], cwd=workdir, capture_output=True, text=True,
                          env=env, timeout=900)


def test_the_gate_fails_with_exit_3_and_writes_the_ci_files(workdir):
    proc = _run(workdir, "--trainers", "ignite", "--seeds", "2", "--probes", "semantics", "--fail-on", "semantics",
                "--plain")
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert "CI gate failed (--fail-on):" in proc.stderr and "ignite/defaults" in proc.stderr
    suite = next(iter(JUnitXml.fromfile(str(workdir / "verdict" / "junit.xml"))))
    failed = {(c.classname, c.name) for c in suite if any(isinstance(r, Failure) for r in c.result)}
    assert ("evalkit.ignite.defaults.mlp_regression", "semantics") in failed
    assert suite.tests == 2 * len(dimension_names())               # ignite's two modes x every dimension
    summary = (workdir / "verdict" / "summary.md").read_text()
    assert summary.startswith("# evalkit verdict\n\n**CI gate failed** (`--fail-on semantics`)")


def test_a_bad_gate_is_refused_before_anything_trains(workdir):
    proc = _run(workdir, "--trainers", "ignite", "--fail-on", "semantcs")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("evalkit-eval: --fail-on: unknown dimension(s) ['semantcs']; choose from ")
    assert not (workdir / "mlflow.db").exists()


def test_help_lists_the_exit_codes(workdir):
    for program in ("evalkit-eval", "evalkit-verdict"):
        proc = subprocess.run([os.path.join(BIN, program), "--help"], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0 and "exit codes:" in proc.stdout, program
        assert "  3  " in proc.stdout and "--fail-on" in proc.stdout, program
