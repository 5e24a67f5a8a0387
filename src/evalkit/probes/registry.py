"""The probes evalkit has, by their `probe=<name>` choice (each loaded only when it runs)."""
from __future__ import annotations

import importlib

from evalkit.probes.base import Probe

PROBES = {   # name -> module holding `PROBE`
    "semantics": "evalkit.probes.semantics.probe",
    "performance": "evalkit.probes.performance.probe",
    "consistency": "evalkit.probes.consistency.probe",
    "functional": "evalkit.probes.functional.probe",
    "stability": "evalkit.probes.stability.probe",
    "customization": "evalkit.probes.customization.probe",
    "maintenance": "evalkit.probes.maintenance.probe",
}


def probe_names() -> tuple[str, ...]:
    return tuple(PROBES)


def load_probe(name: str) -> Probe:
    if name not in PROBES:
        raise ValueError(f"probe={name} is not a probe: choose one of none, {', '.join(PROBES)}")
    return importlib.import_module(PROBES[name]).PROBE
