"""Create a wrapper's environment: a virtual environment without pip of its own, whose site-packages come first
and a `.pth` file appending evalkit's own (`site.addsitedir`, so that their `.pth` files, an editable evalkit's
among them, work there too). pip, evalkit's own, runs in it twice:

1. `pip install --dry-run --report` with torch constrained to the installed version: the resolution sees everything
   evalkit's environment holds, reuses what satisfies the requirements, and lists only what the environment must
   install; a release that needs another torch ends here (ResolutionImpossible) before anything is downloaded or
   written, and the refusal is pip's own line naming the conflict;
2. `pip install --no-deps --ignore-installed` of exactly the listed pins: into the environment's site-packages,
   never looking at evalkit's (pip would otherwise "attempt" to uninstall each shadowed distribution from evalkit's
   environment, and refuse only because it lies outside this one).

Then the environment's interpreter imports torch (it must be evalkit's), evalkit's worker and the modules of the
bundled trainer whose wrapper it pins; only then is the manifest written. A failure removes what was created.
"""
from __future__ import annotations

import contextlib
import datetime
import fcntl
import json
import os
import shutil
import subprocess
import sys
import venv
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement

from evalkit import trainers
from evalkit.envs.naming import canonical, env_name, name_problem
from evalkit.envs.pip_output import refusal, report_problem
from evalkit.envs.store import PTH_FILE, Env, base_site_packages, env, envs_root, torch_version

PIP_TIMEOUT_S = 1800
CHECK_TIMEOUT_S = 300
LOG_FILE = "evalkit-env.log"     # pip's and the import check's output, in the environment


class CreateRefused(RuntimeError):
    """The environment cannot be created: one line naming the conflict (the environment is not left behind)."""


def create(requirements: list[str], name: str | None = None, root: Path | None = None,
           say: Any = lambda line: None) -> tuple[Env, bool]:
    """The environment of these requirements, created unless it exists: (env, created)."""
    if not requirements:
        raise CreateRefused("name at least one requirement, e.g. evalkit-env create pytorch-ignite==0.4.11")
    for line in requirements:
        problem = requirement_problem(line)
        if problem:
            raise CreateRefused(problem)
    name = name or env_name(requirements)
    if name_problem(name):
        raise CreateRefused(name_problem(name))
    target = env(name, root or envs_root())
    target.path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(target):
        manifest = target.manifest() if target.exists else None
        if manifest is not None:
            if manifest.get("requirements") != list(requirements):
                raise CreateRefused(f"environment '{name}' exists with {' '.join(manifest.get('requirements', []))}: "
                                    f"remove it first (evalkit-env remove {name}) or choose another --name")
            return target, False
        if target.path.exists():
            shutil.rmtree(target.path)       # an earlier creation that did not finish
        try:
            _build(target, list(requirements), say)
        except BaseException:
            shutil.rmtree(target.path, ignore_errors=True)
            raise
    return target, True


def requirement_problem(line: str) -> str | None:
    """Why `line` is not a requirement pip would read as one (PEP 508), or None."""
    try:
        Requirement(line)
    except InvalidRequirement as exc:
        first = str(exc).splitlines()[0]
        return f"'{line}' is not a requirement ({first}): write name and version, e.g. lightning==2.5.3"
    return None


@contextlib.contextmanager
def _locked(target: Env) -> Iterator[None]:
    """One creation of a name at a time (two sweeps asking for the same environment)."""
    with open(target.path.parent / f".{target.name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _build(target: Env, requirements: list[str], say: Any) -> None:
    torch = torch_version()
    if torch is None:
        raise CreateRefused("evalkit's environment has no torch to reuse: pip install -e . first")
    venv.EnvBuilder(with_pip=False, symlinks=True).create(str(target.path))
    base = base_site_packages()
    (target.site_packages / PTH_FILE).write_text(
        "".join(f"import site; site.addsitedir({path!r})\n" for path in base))
    constraints = target.path / "constraints.txt"
    constraints.write_text(f"torch=={torch}\n")
    log = target.path / LOG_FILE
    report_file = target.path / "pip-report.json"
    say(f"resolving {' '.join(requirements)} beside torch {torch}")
    dry = _pip(target, ["--dry-run", "--report", str(report_file), "-c", str(constraints), *requirements], log)
    if dry.returncode != 0:
        raise CreateRefused(refusal(requirements, dry.stdout, torch))
    report = json.loads(report_file.read_text())
    problem = report_problem(report, torch)
    if problem:
        raise CreateRefused(f"{' '.join(requirements)}: {problem}")
    pins = [f"{item['metadata']['name']}=={item['metadata']['version']}" for item in report.get("install", [])]
    if pins:
        say(f"installing {' '.join(pins)}")
        done = _pip(target, ["--no-deps", "--ignore-installed", "--no-warn-conflicts", *pins], log)
        if done.returncode != 0:
            raise CreateRefused(refusal(requirements, done.stdout, torch))
    check = _check_imports(target, _modules_to_check(requirements), log)
    if check:
        raise CreateRefused(f"{' '.join(requirements)} installs beside torch {torch} but {check}")
    target.write_manifest(_manifest(target, requirements, torch, base))


def _pip(target: Env, args: list[str], log: Path) -> subprocess.CompletedProcess:
    """evalkit's pip, run by the environment's interpreter (it installs into the environment); output to the log."""
    command = [str(target.python), "-m", "pip", "install", "--disable-pip-version-check", *args]
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=PIP_TIMEOUT_S)
    with open(log, "a") as fh:
        fh.write(f"$ {' '.join(command)}\n{done.stdout}\n")
    return done


def _modules_to_check(requirements: list[str]) -> list[str]:
    """The modules of each bundled trainer whose wrapper is one of these requirements' distributions."""
    wanted = {canonical(m.group(1)) for m in map(trainers.REQUIREMENT_NAME.match, requirements) if m}
    modules: list[str] = []
    for trainer in trainers.bundled_trainers().values():
        if canonical(trainers.wrapper_distribution(trainer) or "-") in wanted:
            modules += trainers.modules(trainer)
    return list(dict.fromkeys(modules))


CHECK = """
import importlib, json, sys
out = {"errors": {}}
for module in ["torch", "evalkit.worker.run", *sys.argv[1:]]:
    try:
        importlib.import_module(module)
    except BaseException as exc:
        out["errors"][module] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
torch = sys.modules.get("torch")
out["torch"] = [getattr(torch, "__version__", None), getattr(torch, "__file__", None)]
print(json.dumps(out))
"""


def _check_imports(target: Env, modules: list[str], log: Path) -> str | None:
    """What the environment's interpreter cannot import (torch must be evalkit's own), or None."""
    done = subprocess.run([str(target.python), "-c", CHECK, *modules], capture_output=True, text=True,
                          timeout=CHECK_TIMEOUT_S)
    with open(log, "a") as fh:
        fh.write(f"$ import check {' '.join(modules)}\n{done.stdout}{done.stderr}\n")
    try:
        out = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return f"its interpreter could not run the import check (exit {done.returncode}): see {log}"
    if out["errors"]:
        module, error = next(iter(out["errors"].items()))
        return f"{module} does not import there: {error}"
    version, path = out["torch"]
    if version != torch_version() or not any(os.path.realpath(path).startswith(p) for p in base_site_packages()):
        return f"its torch is {version} at {path}, not evalkit's {torch_version()}"
    return None


def _manifest(target: Env, requirements: list[str], torch: str, base: list[str]) -> dict[str, Any]:
    installed = target.installed()
    base_versions = {canonical(d.metadata["Name"]): d.version for d in metadata.distributions(path=base)
                     if d.metadata.get("Name")}
    resolved = {}
    for line in requirements:
        match = trainers.REQUIREMENT_NAME.match(line)
        dist = canonical(match.group(1)) if match else line
        resolved[dist] = next((v for k, v in installed.items() if canonical(k) == dist), None) \
            or base_versions.get(dist)
    return {"name": target.name, "requirements": requirements, "resolved": resolved, "installed": installed,
            "shadows": {k: base_versions[canonical(k)] for k in installed if canonical(k) in base_versions},
            "torch": torch, "python": ".".join(map(str, sys.version_info[:3])), "base_site_packages": base,
            "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
