"""The trainers: which ones evalkit bundles (`conf/trainer/*.yaml`, read as data), which modules each needs and
which pip extra brings them, whether they are installed, and the message that says how to install them. The
controller's preflight, the worker, `evalkit-eval` and the config check all ask here; the YAMLs are the only
place a trainer's needs are written (tests/unit/test_trainers.py checks that pyproject's extras match them).

The install command fits the way this evalkit was installed: an editable install from a checkout
(`pip install -e .`) gets `pip install -e '<checkout>[extra]'`, which works from any directory; anything else (a
wheel) gets `pip install 'evalkit[extra]'`. The install kind comes from the distribution's `direct_url.json`
(PEP 610), which pip writes for every install that did not come from an index.
"""
from __future__ import annotations

import importlib.util
import json
import shlex
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Iterator
from urllib.parse import urlparse
from urllib.request import url2pathname

from omegaconf import DictConfig, OmegaConf

TRAINER_CONF = Path(__file__).parent / "conf" / "trainer"
DISTRIBUTION = "evalkit"


@lru_cache(maxsize=1)
def bundled_trainers() -> dict[str, DictConfig]:
    """name -> that trainer's YAML, for every bundled trainer."""
    return {path.stem: OmegaConf.load(path) for path in sorted(TRAINER_CONF.glob("*.yaml"))}


def identity_problem(trainer: DictConfig) -> str | None:
    """Why the job's trainer name would misname what runs, or None. `trainer._target_` overridden under a
    bundled trainer's name (`trainer=baseline` by default) would record a wrapper as that trainer, and the
    verdict would pool it into that arm. The trainer's own customizations (probe=customization) run under its name."""
    bundled = bundled_trainers().get(trainer.name)
    if bundled is None or bundled._target_ == trainer._target_:
        return None
    if trainer._target_ in dict(bundled.get("customizations") or {}).values():
        return None
    same = [name for name, conf in bundled_trainers().items() if conf._target_ == trainer._target_]
    fix = f"use trainer={same[0]}" if same else "give the adapter its own name with trainer.name=<name>"
    return (f"trainer._target_={trainer._target_} is not the adapter of trainer={trainer.name} "
            f"({bundled._target_}); the run would be recorded as {trainer.name}: {fix}")


# ------------------------------------------------------------------ what a trainer needs, and whether it is there
def requirements(trainer: DictConfig) -> dict[str, str]:
    """module -> the extra that installs it ("" when none does), for a job's trainer config: the modules its
    `requires` lists with its `extra`, and those of the bundled trainer whose adapter class it runs (a bundled
    adapter run under another `trainer.name` needs its wrapper all the same)."""
    needs = {module: trainer.get("extra", "") for module in trainer.get("requires", [])}
    for conf in bundled_trainers().values():
        if conf._target_ == trainer.get("_target_"):
            needs.update({module: conf.extra for module in conf.requires if module not in needs})
    return needs


def missing_module(trainer: DictConfig) -> str | None:
    """The first module the trainer needs that cannot be imported, or None."""
    return next((module for module in requirements(trainer) if importlib.util.find_spec(module) is None), None)


def not_installed(trainer: DictConfig, module: str | None = None) -> str | None:
    """The one-line message for a trainer whose wrapper is not installed (`module`: the module found missing,
    else the first the trainer needs that cannot be imported), or None when everything it needs is there."""
    module = module or missing_module(trainer)
    if module is None:
        return None
    return (f"trainer '{trainer.name}' needs the '{module}' package, which is not installed: "
            f"{install_hint(requirements(trainer).get(module) or trainer.get('extra', ''), module)}")


def install_hint(extra: str, module: str) -> str:
    """How to install `module`: the command for its extra, or (no extra brings it) what to look for."""
    return install_command(extra) if extra else f"install the package that provides '{module}'"


def installed_trainers() -> tuple[list[str], dict[str, str]]:
    """The bundled trainers whose wrapper is installed (the baseline first), and for each of the others how to
    install it (`install_hint`)."""
    ready, missing = [], {}
    for name, trainer in bundled_trainers().items():
        module = missing_module(trainer)
        if module is None:
            ready.append(name)
        else:
            missing[name] = install_hint(trainer.extra, module)
    ready.sort(key=lambda name: name != "baseline")
    return ready, missing


# ------------------------------------------------------------------ the install command
def install_command(extra: str) -> str:
    """The shell command that installs `extra`, quoted for copying into a shell."""
    checkout = editable_checkout()
    if checkout is not None:
        return f"pip install -e {shlex.quote(f'{checkout}[{extra}]')}"
    return f"pip install {shlex.quote(f'{DISTRIBUTION}[{extra}]')}"


def editable_checkout() -> Path | None:
    """The checkout this evalkit is imported from, when it is an editable install of it; else None.

    A distribution counts only if the running package lives inside its source directory (a stale
    `evalkit.egg-info` in the working directory, or an editable install of another checkout, does not)."""
    package = Path(__file__).resolve().parent
    for text in _direct_urls():
        source = _editable_source(text)
        if source is not None and package.is_relative_to(source):
            return source
    return None


def _direct_urls() -> Iterator[str | None]:
    """The `direct_url.json` text of every installed evalkit distribution (None where there is none)."""
    for dist in metadata.distributions(name=DISTRIBUTION):
        yield dist.read_text("direct_url.json")


def _editable_source(text: str | None) -> Path | None:
    try:
        info = json.loads(text) if text else {}
    except ValueError:
        return None
    if not isinstance(info, dict):
        return None
    url = info.get("url", "")
    if not (info.get("dir_info") or {}).get("editable") or not url.startswith("file:"):
        return None
    return Path(url2pathname(urlparse(url).path)).resolve()
