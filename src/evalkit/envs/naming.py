"""An environment's name, derived from the requirements it was created from, and back: the command that creates
the environment a `trainer.env` names.

`pytorch-ignite==0.4.11` -> `pytorch-ignite-0.4.11`; several pins joined by `_`
(`transformers-4.45.2_accelerate-0.34.2`); anything but plain `name==version` pins -> a slug and a hash of the
requirements (`transformers-4.40-4.46-3f2a9c1e`), whose command needs `--name`.
"""
from __future__ import annotations

import hashlib
import re
import shlex

PIN = re.compile(r"^\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*==\s*([0-9][A-Za-z0-9.+!]*)\s*$")
VALID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$")   # one folder name, never a path


def canonical(distribution: str) -> str:
    """A distribution's name as the package index compares it (PEP 503): `PyTorch_Ignite` -> `pytorch-ignite`."""
    return re.sub(r"[-_.]+", "-", distribution).lower()


def env_name(requirements: list[str]) -> str:
    """The name an environment of these requirements gets unless `--name` gives one."""
    pins = [PIN.match(line) for line in requirements]
    if pins and all(pins):
        return "_".join(f"{canonical(m.group(1))}-{m.group(2)}" for m in pins)
    slug = re.sub(r"[^a-z0-9.]+", "-", " ".join(requirements).lower()).strip("-.")[:60] or "env"
    return f"{slug}-{hashlib.sha1(chr(10).join(requirements).encode()).hexdigest()[:8]}"


def requirements_of(name: str) -> list[str] | None:
    """The pins a derived name was made from (`pytorch-ignite-0.4.11` -> `["pytorch-ignite==0.4.11"]`), or None
    when the name is not one `env_name` makes from plain pins."""
    pins = []
    for part in name.split("_"):
        dist, _, version = part.rpartition("-")
        if not dist or not version[:1].isdigit():
            return None
        pins.append(f"{dist}=={version}")
    return pins if env_name(pins) == name else None


def name_problem(name: str) -> str | None:
    """Why `name` cannot name an environment (a folder under the environments' folder), or None."""
    if VALID.match(name) and ".." not in name:
        return None
    return (f"'{name}' is not an environment name: letters, digits and . _ + - only, starting with a letter or a "
            "digit (e.g. pytorch-ignite-0.4.11)")


def create_command(name: str) -> str:
    """The command that creates the environment `name`."""
    pins = requirements_of(name)
    if pins:
        return "evalkit-env create " + " ".join(shlex.quote(pin) for pin in pins)
    return f"evalkit-env create <requirement> --name {shlex.quote(name)}"
