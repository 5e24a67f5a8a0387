"""What the maintenance probe measures outside its standard run, once per probe run, as one JSON-able dict.

- dependencies: the wrapper distribution's transitive closure from installed metadata (`deps.py`);
- imports: the wrapper's import time and resident memory in fresh processes, torch imported first (`imports.py`);
- releases: its release history from the package index, cached on disk with its date (`releases.py`); with
  `offline` the index is never asked: the cache, marked with its date, or "unavailable";
- candidates: wrappers named in `candidates` that are not installed, with the requirements of their latest release
  that the installed torch/numpy do not satisfy (read from the index's metadata, cached the same way).
The limits the judge applies travel with it, so a judgement can be repeated offline from the stored dict.
"""
from __future__ import annotations

from importlib import metadata
from typing import Any

from evalkit.envs.select import import_path, worker_python
from evalkit.envs.store import EnvUnavailable
from evalkit.probes.maintenance.deps import (
    DistributionNotInstalled,
    dependency_closure,
    installed_versions,
    requirement_conflicts,
)
from evalkit.probes.maintenance.imports import import_cost
from evalkit.probes.maintenance.releases import ReleaseHistory, release_history
from evalkit.trainers import install_hint, modules, wrapper_distribution


def installed_version(distribution: str, path: list[str] | None = None) -> str | None:
    """Its version as an import on `path` (default sys.path) finds it, or None."""
    found = next(iter(metadata.distributions(name=distribution, **({"path": path} if path else {}))), None)
    return found.version if found is not None else None


def measure_environment(trainer: Any, limits: dict[str, Any], cache_dir: str) -> dict[str, Any]:
    """`trainer`: the trainer config (its `requirements` and `modules`, `evalkit.trainers`; in a wrapper's
    environment, `trainer.env`, what that environment's interpreter imports is measured); `limits`:
    probe.maintenance."""
    dist = wrapper_distribution(trainer)
    out: dict[str, Any] = {"limits": limits, "distribution": dist, "notes": []}
    index = dict(index_url=limits["index_url"], cache_dir=cache_dir, offline=bool(limits["offline"]))
    out["candidates"] = [candidate(name, index) for name in limits.get("candidates") or []]
    if not dist:
        out["notes"].append(f"trainer {trainer.get('name')} names no distribution: it is plain torch, nothing is "
                            "measured beyond the standard run")
        return out
    try:
        path = import_path(trainer)
    except EnvUnavailable as exc:
        out["notes"].append(str(exc))
        return out
    version = installed_version(dist, path)
    out["version"] = version
    if version is None:
        out["notes"].append(f"{dist} is not installed: {install_hint(trainer, dist)}")
        return out
    try:
        out["dependencies"] = dependency_closure(dist, path).as_dict()
        out["core"] = core_packages()
    except DistributionNotInstalled as exc:
        out["notes"].append(str(exc))
    imported = modules(trainer)
    if imported:
        out["imports"] = import_cost(imported, repeats=int(limits["import_repeats"]), python=worker_python(trainer),
                                     hint=install_hint(trainer, imported[0])).as_dict()
    out["releases"] = history(dist, version, index).as_dict()
    return out


def core_packages() -> list[str]:
    """What every arm installs anyway (torch with its own dependencies, numpy): a wrapper's added dependencies are
    its closure minus these."""
    core = {"torch", "numpy"}
    try:
        core |= {p["name"] for p in dependency_closure("torch").as_dict()["packages"]}
    except DistributionNotInstalled:
        pass
    return sorted(core)


def history(name: str, version: str | None, index: dict[str, Any]) -> ReleaseHistory:
    """The release history; offline, the cache whatever its age (marked with its date) or "unavailable"."""
    if index["offline"]:
        return release_history(name, version, index_url=index["index_url"], cache_dir=index["cache_dir"],
                               offline=True)
    return release_history(name, version, index_url=index["index_url"], cache_dir=index["cache_dir"])


def candidate(name: str, index: dict[str, Any]) -> dict[str, Any]:
    """A wrapper not installed here: its latest release's requirements that the installed core does not satisfy."""
    if installed_version(name) is not None:
        return {"name": name, "installed": True}
    found = history(name, None, index)
    conflicts = requirement_conflicts(found.latest_requires_dist, installed_versions(), declared_by=name)
    return {"name": name, "installed": False, "source": found.source, "as_of": found.as_of,
            "reason": found.reason, "latest_version": found.latest_version,
            "conflicts": [c.describe() for c in conflicts]}
