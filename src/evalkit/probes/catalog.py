"""The probes evalkit has: one per `conf/probe/<name>.yaml` (`none` aside), found there, read as data.

A probe is a package and a YAML. The YAML names the probe's class (`_target_`) and sets its settings; the first
entry of its defaults list names their schema by import path (`/evalkit.probes.semantics.settings.
SemanticsProbeConfig@_here_`), a dataclass in the probe's package (a subclass of `config.ProbeConfig`) that
`config.register_configs` stores under that name, so that a key the schema lacks (a setting of another probe) fails at
compose time. The schema's module also holds the probe's part in evalkit-eval's presets (`PRESETS`, read by
`presets.plan_for`). Listing the probes reads YAML only; a schema's module is imported by every config check, so it
imports no torch (pyproject's contract), and the probe's class only when the probe is loaded.
"""
from __future__ import annotations

import dataclasses
import functools
import importlib
import typing
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf

if TYPE_CHECKING:
    from evalkit.probes.base import Probe

PROBE_CONF = Path(__file__).resolve().parents[1] / "conf" / "probe"
NO_PROBE = "none"          # `probe=none`: one plain job (conf/probe/none.yaml names no class)


def probe_yamls() -> dict[str, DictConfig]:
    """name -> its YAML as written, for every probe in PROBE_CONF, by name."""
    return _read(PROBE_CONF)


@functools.cache
def _read(folder: Path) -> dict[str, DictConfig]:
    return {path.stem: OmegaConf.load(path) for path in sorted(folder.glob("*.yaml")) if path.stem != NO_PROBE}


def probe_names() -> tuple[str, ...]:
    return tuple(probe_yamls())


def schema_path(yaml: DictConfig) -> str | None:
    """The import path of the schema a probe YAML's defaults list names (`/<path>@_here_`), or None."""
    for entry in yaml.get("defaults", []):
        if isinstance(entry, str) and entry.startswith("/") and entry.endswith("@_here_"):
            return entry.removeprefix("/").removesuffix("@_here_")
    return None


def schemas() -> dict[str, type]:
    """name -> the schema of its settings, for every probe whose YAML names one."""
    return {name: _import(path) for name, path in _schema_paths().items()}


def stored_schemas() -> dict[str, type]:
    """import path -> schema, for every probe whose YAML names one: what `config.register_configs` stores."""
    return {path: _import(path) for path in _schema_paths().values()}


def _schema_paths() -> dict[str, str]:
    return {name: path for name, yaml in probe_yamls().items() if (path := schema_path(yaml))}


def probe_with(key: str) -> list[str]:
    """The probes whose settings include `key` (`seeds`, `performance.depths`), by name."""
    return [name for name, schema in schemas().items() if _has(schema, key.split("."))]


def load_probe(name: str) -> Probe:
    """The probe `probe=<name>` runs: an instance of the class its YAML names."""
    if name not in probe_yamls():
        raise ValueError(f"probe={name} is not a probe: choose one of {NO_PROBE}, {', '.join(probe_names())}")
    return probe_from(probe_yamls()[name]._target_)


def probe_from(target: str) -> Probe:
    """An instance of the probe class `target` names (`pkg.module.Class`)."""
    return _import(target)()


def _import(path: str) -> Any:
    module, _, attribute = path.rpartition(".")
    return getattr(importlib.import_module(module), attribute)


def _has(schema: Any, parts: list[str]) -> bool:
    hints = typing.get_type_hints(schema) if dataclasses.is_dataclass(schema) else {}
    return parts[0] in hints and (len(parts) == 1 or _has(hints[parts[0]], parts[1:]))
