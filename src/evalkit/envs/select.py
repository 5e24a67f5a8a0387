"""Which interpreter runs a job's workers: evalkit's own (`trainer.env` null), or that of the environment
`trainer.env` names, checked before launch: it exists, runs beside this torch, and pins the trainer's wrapper."""
from __future__ import annotations

import sys
from typing import Any

from evalkit import trainers
from evalkit.envs.naming import canonical
from evalkit.envs.store import EnvUnavailable, ready


def env_problem(trainer: Any) -> str | None:
    """Why the trainer's `env` cannot run its workers, or None (also when it names none)."""
    name = trainer.get("env")
    if not name:
        return None
    try:
        manifest = ready(name).manifest()
    except EnvUnavailable as exc:
        return str(exc)
    wrapper = trainers.wrapper_distribution(trainer)
    pinned = {canonical(dist) for dist in manifest.get("resolved", {})}
    if not wrapper:
        return (f"trainer.env={name} with trainer={trainer.name}: the trainer names no wrapper to run at another "
                "version (its trainer.requirements are empty): drop trainer.env")
    if canonical(wrapper) not in pinned:
        return (f"trainer.env={name} holds {' '.join(manifest.get('requirements', []))}, not trainer={trainer.name}'s "
                f"wrapper {wrapper}: create one with `evalkit-env create {wrapper}==<version>`")
    return None


def import_path(trainer: Any) -> list[str] | None:
    """Where the workers' imports find distributions: the environment's site-packages, then this interpreter's
    path; None (this interpreter's path) when the trainer names no environment."""
    name = trainer.get("env")
    return [str(ready(name).site_packages), *sys.path] if name else None


def worker_python(trainer: Any) -> str:
    """The interpreter of the job's workers (the environment checked by `env_problem` before launch)."""
    name = trainer.get("env")
    return str(ready(name).python) if name else sys.executable
