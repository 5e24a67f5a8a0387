"""The trainers: which ones evalkit bundles (`conf/trainer/*.yaml`, read as data), what each needs, whether it is
installed, and the message that says how to install it. A trainer's YAML is the only place its needs are written:
- `requirements`: what pip installs (pinned), whose distributions' versions every run records (the first is the
  wrapper's own: its version tag, the maintenance probe's releases and dependencies); pyproject's `all` extra holds
  every bundled trainer's, checked by tests/unit/test_trainers.py;
- `modules`: what the adapter imports: checked before launch (their top-level packages), imported before the task
  is built (the worker, the warm server), the maintenance probe's import cost;
- `docs`: the wrapper's own documentation (host[/path] prefixes): the only pages a documented-unsupported refusal may
  cite (`docs_page`, asked by the probes' judges: evalkit.probes.refusals).
The controller's preflight, the worker, the warm server, the probes, `evalkit-eval` and the config check all ask
here.
"""
from __future__ import annotations

import importlib.util
import re
import shlex
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from omegaconf import DictConfig, OmegaConf

TRAINER_CONF = Path(__file__).parent / "conf" / "trainer"
REQUIREMENT_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")   # a PEP 508 requirement's distribution name


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
def _listed(trainer: DictConfig, key: str) -> list[str]:
    """`trainer.<key>`, then that of the bundled trainer whose adapter class it runs (a bundled adapter run under
    another `trainer.name` needs its wrapper all the same), each once."""
    values = [str(v) for v in trainer.get(key) or []]
    for conf in bundled_trainers().values():
        if conf._target_ == trainer.get("_target_"):
            values += [str(v) for v in conf.get(key) or []]
    return list(dict.fromkeys(values))


def requirements(trainer: DictConfig) -> list[str]:
    """The pip requirements that install the trainer's wrapper (`["lightning==2.6.6"]`; none for the baseline)."""
    return _listed(trainer, "requirements")


def modules(trainer: DictConfig) -> list[str]:
    """The modules the trainer's adapter imports (`["lightning.pytorch", ...]`)."""
    return _listed(trainer, "modules")


def docs(trainer: DictConfig | dict[str, Any]) -> list[str]:
    """The wrapper's documentation, as host[/path] prefixes (`["lightning.ai/docs/pytorch"]`): the trainer's own
    `docs`, then those of the bundled trainer whose adapter it runs (a job recorded before `docs` existed, a bundled
    adapter under another name). Empty for a trainer that names none."""
    return _listed(trainer, "docs")


def docs_page(trainer: DictConfig | dict[str, Any], url: str) -> bool:
    """Whether `url` is an http(s) page of the wrapper's documentation: its host is a `docs` entry's host (or a
    subdomain of it) and its path lies under the entry's path, segment by segment."""
    page = urlsplit(str(url).strip())
    if page.scheme not in ("http", "https") or not page.hostname:
        return False
    path = page.path.rstrip("/") + "/"
    for entry in docs(trainer):
        host, _, prefix = entry.strip().strip("/").partition("/")
        host = host.lower()
        if (page.hostname == host or page.hostname.endswith("." + host)) and path.startswith(
                "/" + (prefix.strip("/") + "/" if prefix.strip("/") else "")):
            return True
    return False


def distributions(trainer: DictConfig) -> list[str]:
    """The distributions its requirements name, the wrapper's own first."""
    names = [REQUIREMENT_NAME.match(line) for line in requirements(trainer)]
    return [name.group(1) for name in names if name]


def wrapper_distribution(trainer: DictConfig) -> str:
    """The wrapper's distribution on the package index; "" for plain torch."""
    return next(iter(distributions(trainer)), "")


def cited_version(trainer: DictConfig) -> str | None:
    """The wrapper's release its adapter cites: the `==` pin of its own requirement (the quick start defaults mode
    follows, page by page); None for plain torch or an unpinned requirement."""
    wrapper = wrapper_distribution(trainer)
    for line in requirements(trainer):
        name, _, version = line.partition("==")
        if wrapper and name.strip() == wrapper and version.strip():
            return version.strip()
    return None


def versions(trainer: DictConfig) -> dict[str, str]:
    """distribution -> its installed version ("not installed" when absent), for the trainer's requirements."""
    out = {}
    for name in distributions(trainer):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def packages(trainer: DictConfig) -> list[str]:
    """The top-level packages of its modules (`lightning`), what an installed wrapper makes importable."""
    return list(dict.fromkeys(module.split(".")[0] for module in modules(trainer)))


def missing_module(trainer: DictConfig) -> str | None:
    """The first package the trainer needs that cannot be imported, or None."""
    return next((name for name in packages(trainer) if importlib.util.find_spec(name) is None), None)


def not_installed(trainer: DictConfig, module: str | None = None) -> str | None:
    """The one-line message for a trainer whose wrapper is not installed (`module`: the module found missing,
    else the first the trainer needs that cannot be imported), or None when everything it needs is there."""
    module = module or missing_module(trainer)
    if module is None:
        return None
    return (f"trainer '{trainer.name}' needs the '{module}' package, which is not installed: "
            f"{install_hint(trainer, module)}")


def install_hint(trainer: DictConfig, module: str) -> str:
    """How to install what the trainer needs: pip with its requirements, or (it names none) what to look for."""
    lines = requirements(trainer)
    if not lines:
        return f"install the package that provides '{module}'"
    return "pip install " + " ".join(shlex.quote(line) for line in lines)


def installed_trainers() -> tuple[list[str], dict[str, str]]:
    """The bundled trainers whose wrapper is installed (the baseline first), and for each of the others how to
    install it (`install_hint`)."""
    ready, missing = [], {}
    for name, trainer in bundled_trainers().items():
        module = missing_module(trainer)
        if module is None:
            ready.append(name)
        else:
            missing[name] = install_hint(trainer, module)
    ready.sort(key=lambda name: name != "baseline")
    return ready, missing
