"""The probes evalkit has: one per `conf/probe/<name>.yaml` (`none` aside), found there, read as data.

A probe is a package and a YAML. The YAML names the probe's class (`_target_`) and sets its settings; the first
entry of its defaults list names their schema by import path (`/evalkit.probes.semantics.settings.
SemanticsProbeConfig@_here_`), a dataclass in the probe's package (a subclass of `config.ProbeConfig`) that
`config.register_configs` stores under that name, so that a key the schema lacks (a setting of another probe) fails at
compose time. The schema's module also holds the probe's part in evalkit-eval's presets (`PRESETS`, read by
`presets.plan_for`). Listing the probes reads YAML only; a schema's module is imported by every config check, so it
imports no torch (pyproject's contract), and the probe's class only when the probe is loaded. The same module
declares what the verdict shows of the probe's dimension (`DIMENSION`, evalkit.probes.dimension), which every part
of the verdict reads from here (`dimensions`): adding a probe edits nothing else (docs/probes/adding.md).
"""
from __future__ import annotations

import dataclasses
import functools
import importlib
import typing
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf

from evalkit.probes.dimension import Dimension

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


def dimensions(order: str = "column") -> tuple[Dimension, ...]:
    """Every probe's dimension as its settings module declares it, in the table's order (`column`) or in the order
    the first screen asks them (`asks`)."""
    if order not in ("column", "asks"):
        raise ValueError(f"order={order!r}: column or asks")
    return _dimensions(PROBE_CONF, order)


def dimension_names(order: str = "column") -> tuple[str, ...]:
    return tuple(d.name for d in dimensions(order))


def dimension(name: str) -> Dimension:
    """The dimension of probe `name` (KeyError for a name that is no probe's)."""
    found = {d.name: d for d in dimensions()}
    if name not in found:
        raise KeyError(f"{name!r} is not a probe's dimension: choose one of {', '.join(found)}")
    return found[name]


@functools.cache
def _dimensions(folder: Path, order: str) -> tuple[Dimension, ...]:
    found = []
    for name, path in _schema_paths().items():
        module = importlib.import_module(path.rpartition(".")[0])
        declared = getattr(module, "DIMENSION", None)
        if not isinstance(declared, Dimension):
            raise TypeError(f"probe {name}: {module.__name__} declares no DIMENSION = evalkit.probes.dimension."
                            "Dimension(...) (what the verdict shows of it): see docs/probes/adding.md")
        found.append(dataclasses.replace(declared, name=name))
    return tuple(sorted(found, key=lambda d: (getattr(d, order), d.name)))


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
