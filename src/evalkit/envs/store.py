"""Where the environments live and what each holds: the folder (`EVALKIT_ENVS_DIR`, else
`$XDG_CACHE_HOME/evalkit/envs`, else `~/.cache/evalkit/envs`), one virtual environment per name, its manifest
(`evalkit-env.json`, written last: an environment without one is incomplete), and the check that an environment
can still run evalkit's workers (created beside the torch and the site-packages evalkit runs with now).
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import sysconfig
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from evalkit import names
from evalkit.envs.naming import create_command, name_problem

PTH_FILE = "_evalkit_base.pth"     # in the environment's site-packages: evalkit's own site-packages, after its own


class EnvUnavailable(RuntimeError):
    """The environment cannot run the workers: the message says why and the command that fixes it."""


def envs_root() -> Path:
    if os.environ.get(names.ENVS_DIR_ENV):
        return Path(os.environ[names.ENVS_DIR_ENV]).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "evalkit" / "envs"


def base_site_packages() -> list[str]:
    """evalkit's own site-packages (purelib, then platlib where it differs): what an environment reuses."""
    paths = sysconfig.get_paths()
    return list(dict.fromkeys(os.path.realpath(paths[key]) for key in ("purelib", "platlib")))


def torch_version() -> str | None:
    """The torch evalkit's environment holds (read from its metadata: torch is never imported here)."""
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None


@dataclass(frozen=True)
class Env:
    name: str
    path: Path

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"

    @property
    def site_packages(self) -> Path:
        return self.path / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"

    @property
    def manifest_path(self) -> Path:
        return self.path / names.ENV_MANIFEST_FILE

    @property
    def exists(self) -> bool:
        return (self.path / "pyvenv.cfg").exists()

    def manifest(self) -> dict[str, Any] | None:
        """The manifest, or None while the environment is incomplete (being created, or its creation failed)."""
        try:
            return json.loads(self.manifest_path.read_text())
        except (OSError, ValueError):
            return None

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        tmp = self.manifest_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
        os.replace(tmp, self.manifest_path)

    def installed(self) -> dict[str, str]:
        """The distributions the environment installed itself (not those it reuses), name -> version."""
        found = {}
        for dist in metadata.distributions(path=[str(self.site_packages)]):
            if dist.metadata.get("Name"):
                found.setdefault(dist.metadata["Name"], dist.version)
        return dict(sorted(found.items(), key=lambda kv: kv[0].lower()))


def env(name: str, root: Path | None = None) -> Env:
    problem = name_problem(name)
    if problem:
        raise EnvUnavailable(problem)
    return Env(name, (root or envs_root()) / name)


def all_envs(root: Path | None = None) -> list[Env]:
    root = root or envs_root()
    if not root.is_dir():
        return []
    return [Env(p.name, p) for p in sorted(root.iterdir()) if (p / "pyvenv.cfg").exists()]


def remove(name: str, root: Path | None = None) -> Env:
    """Delete the environment `name` (complete or not); EnvUnavailable when there is none."""
    found = env(name, root)
    if not found.exists:
        raise EnvUnavailable(f"no environment '{name}' in {found.path.parent}")
    shutil.rmtree(found.path)
    return found


def ready(name: str, root: Path | None = None) -> Env:
    """The environment `name`, checked to run evalkit's workers today, or EnvUnavailable naming the fix: missing,
    incomplete, or created beside another torch or another evalkit environment than this one."""
    found = env(name, root)
    manifest = found.manifest() if found.exists else None
    if not found.exists:
        raise EnvUnavailable(f"trainer.env={name}: no such environment in {found.path.parent}: create it with "
                             f"`{create_command(name)}`")
    recreate = f"`evalkit-env remove {name}` then `{create_command(name)}`"
    if manifest is None:
        raise EnvUnavailable(f"trainer.env={name}: the environment in {found.path} is incomplete (its creation did "
                             f"not finish): recreate it with {recreate}")
    if manifest.get("torch") != torch_version():
        raise EnvUnavailable(f"trainer.env={name} was created beside torch {manifest.get('torch')}, evalkit now runs "
                             f"torch {torch_version()}: recreate it with {recreate}")
    if manifest.get("base_site_packages") != base_site_packages() or not found.python.exists():
        raise EnvUnavailable(f"trainer.env={name} was created for evalkit's environment at "
                             f"{', '.join(manifest.get('base_site_packages') or ['?'])}, this one is at "
                             f"{', '.join(base_site_packages())}: recreate it with {recreate}")
    return found
