"""A wrapper at a version (issue 33): `evalkit-env create` with the real pip, from a local folder of planted wheels
(no index, no network), and one real `evalkit` job whose workers run the environment's interpreter.

The planted wrapper `planted-wrapper` is absent from evalkit's environment: a run records its version only when its
workers ran in the environment (evalkit's own interpreter would record "not installed")."""
from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from helpers import job_runs, run_evalkit

from evalkit import names
from evalkit.envs.store import base_site_packages

_SCRIPT = os.path.join(os.path.dirname(sys.executable), "evalkit-env")
EVALKIT_ENV = [_SCRIPT] if os.path.exists(_SCRIPT) else [sys.executable, "-m", "evalkit.envs.cli"]


def planted_wheel(folder: Path, version: str, requires_torch: str) -> None:
    """`planted-wrapper` at `version`, whose metadata asks for torch `requires_torch`."""
    files = {"planted_wrapper/__init__.py": f"__version__ = {version!r}\n",
             f"planted_wrapper-{version}.dist-info/METADATA":
                 f"Metadata-Version: 2.1\nName: planted-wrapper\nVersion: {version}\n"
                 f"Requires-Dist: torch{requires_torch}\n",
             f"planted_wrapper-{version}.dist-info/WHEEL":
                 "Wheel-Version: 1.0\nGenerator: evalkit-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = f"planted_wrapper-{version}.dist-info/RECORD"
    lines = [f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b'=').decode()}"
             f",{len(text)}" for name, text in files.items()]
    with zipfile.ZipFile(folder / f"planted_wrapper-{version}-py3-none-any.whl", "w") as whl:
        for name, text in files.items():
            whl.writestr(name, text)
        whl.writestr(record, "\n".join([*lines, f"{record},,"]) + "\n")


@pytest.fixture
def index(tmp_path, monkeypatch):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    planted_wheel(wheels, "1.0", "<2.0")        # a release of the torch 1 days
    planted_wheel(wheels, "2.0", ">=2.0")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    monkeypatch.setenv(names.ENVS_DIR_ENV, str(tmp_path / "envs"))
    return tmp_path / "envs"


def evalkit_env(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*EVALKIT_ENV, *args], capture_output=True, text=True, timeout=600)


def _base_listing() -> list[str]:
    return sorted(name for path in base_site_packages() for name in os.listdir(path))


def test_a_release_that_needs_another_torch_is_refused_in_one_line_and_leaves_nothing(index):
    proc = evalkit_env("create", "planted-wrapper==1.0")
    assert proc.returncode == 1
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("evalkit-env: planted-wrapper==1.0 cannot install beside torch ")
    assert line.endswith("planted-wrapper 1.0 depends on torch<2.0")
    assert not (index / "planted-wrapper-1.0").exists()


def test_an_environment_is_created_once_and_runs_the_arms_workers_with_its_version(index, tmp_path):
    before = _base_listing()
    proc = evalkit_env("create", "planted-wrapper==2.0")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    env = index / "planted-wrapper-2.0"
    manifest = json.loads((env / names.ENV_MANIFEST_FILE).read_text())
    assert manifest["requirements"] == ["planted-wrapper==2.0"]
    assert manifest["resolved"] == {"planted-wrapper": "2.0"} and manifest["installed"] == {"planted-wrapper": "2.0"}
    assert _base_listing() == before                       # evalkit's environment untouched
    again = evalkit_env("create", "planted-wrapper==2.0")
    assert again.returncode == 0 and "exists (created" in again.stdout
    assert "planted-wrapper==2.0" in evalkit_env("list").stdout

    # the environment's interpreter, wrapped to say when it runs (the venv's own link, renamed: still the venv's)
    used = tmp_path / "interpreter_used.txt"
    (env / "bin" / "python").rename(env / "bin" / "python-real")
    (env / "bin" / "python").write_text(f'#!/bin/sh\necho "$@" >> {used}\nexec "$(dirname "$0")/python-real" "$@"\n')
    (env / "bin" / "python").chmod(0o755)
    workdir = tmp_path / "work"
    workdir.mkdir()
    job = run_evalkit(workdir, "trainer._target_=evalkit.adapters.baseline.BaselineAdapter", "trainer.name=planted",
                      'trainer.requirements=["planted-wrapper==2.0"]', "trainer.env=planted-wrapper-2.0",
                      "train.max_steps=3", "task.n_train=128", "task.n_val=32", "train.val_every=0")
    assert job.returncode == 0, job.stderr[-3000:]
    assert "evalkit.worker" in used.read_text()
    _, (run,) = job_runs(workdir)
    assert run.data.tags[names.TRAINER_ENV] == "planted-wrapper-2.0"
    assert run.data.tags[names.VERSION_PREFIX + "planted-wrapper"] == "2.0"    # "not installed" in evalkit's own
    assert run.data.tags[names.WRAPPER_VERSION] == "2.0"

    assert evalkit_env("remove", "planted-wrapper-2.0").returncode == 0 and not env.exists()
