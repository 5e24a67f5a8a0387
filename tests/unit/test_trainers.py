"""The one source of what a trainer needs (`evalkit.trainers`): pyproject's extras match the trainer YAMLs, every
place that tells a user to install a wrapper says the same thing, and the install command fits the install."""
from __future__ import annotations

import json
import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from helpers import REPO
from omegaconf import OmegaConf
from packaging.requirements import Requirement

from evalkit import trainers
from evalkit.contract import AdapterUnavailable
from evalkit.worker.run import load_adapter

ROOT = REPO
BASELINE = trainers.bundled_trainers()["baseline"]
NEEDY = sorted(name for name, conf in trainers.bundled_trainers().items() if conf.requires)


def _extras() -> dict[str, list[str]]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _distributions(extra: str, seen: frozenset[str] = frozenset()) -> set[str]:
    """The distributions `pip install evalkit[extra]` asks for, with evalkit's own extras expanded."""
    out = set()
    for line in _extras()[extra]:
        requirement = Requirement(line)
        if _canonical(requirement.name) == "evalkit":
            for inner in requirement.extras - seen:
                out |= _distributions(inner, seen | {extra})
        else:
            out.add(_canonical(requirement.name))
    return out


# ------------------------------------------------------------------ pyproject and the trainer YAMLs
@pytest.mark.parametrize("name", NEEDY)
def test_the_extra_a_trainer_names_is_in_pyproject(name):
    conf = trainers.bundled_trainers()[name]
    assert conf.extra, f"conf/trainer/{name}.yaml requires {list(conf.requires)} but names no extra"
    extra = conf.extra
    assert extra in _extras(), f"conf/trainer/{name}.yaml names extra {extra!r}, which pyproject does not define"


@pytest.mark.parametrize("name", NEEDY)
def test_the_extra_installs_the_modules_the_trainer_requires(name):
    conf = trainers.bundled_trainers()[name]
    brought = _distributions(conf.extra)
    for module in conf.requires:
        # Which distribution provides a module is known only once it is installed; else assume its own name.
        providers = {_canonical(d) for d in metadata.packages_distributions().get(module, [module])}
        assert providers & brought, (f"conf/trainer/{name}.yaml requires '{module}' (from {sorted(providers)}), "
                                     f"which pyproject's extra {conf.extra!r} does not install ({sorted(brought)})")


def test_the_all_extra_brings_every_trainer():
    wanted = {conf.extra for conf in trainers.bundled_trainers().values() if conf.extra}
    assert set().union(*(_distributions(extra) for extra in wanted)) <= _distributions("all")


def test_the_baseline_needs_nothing_and_comes_first():
    assert trainers.requirements(trainers.bundled_trainers()["baseline"]) == {}
    assert trainers.installed_trainers()[0][0] == "baseline"


# ------------------------------------------------------------------ one message, wherever it is given
def _fake(**fields):
    return OmegaConf.create({"_target_": "no_such_wrapper_pkg.Adapter", "name": "nosuch", "mode": "aligned",
                             "extra": "nosuch", "requires": ["no_such_wrapper_pkg"], "options": {}, **fields})


def test_every_hint_uses_the_same_command(monkeypatch):
    monkeypatch.setattr(trainers, "_direct_urls", lambda: iter([None]))
    message = ("trainer 'nosuch' needs the 'no_such_wrapper_pkg' package, which is not installed: "
               "pip install 'evalkit[nosuch]'")
    assert trainers.not_installed(_fake()) == message
    with pytest.raises(AdapterUnavailable) as info:     # the worker, before it imports the adapter
        load_adapter(_fake())
    assert str(info.value) == message
    monkeypatch.setattr(trainers, "bundled_trainers", lambda: {"baseline": BASELINE,
                                                               "nosuch": _fake()})
    assert trainers.installed_trainers() == (["baseline"], {"nosuch": "pip install 'evalkit[nosuch]'"})


def test_a_module_no_extra_brings_is_named():
    assert trainers.not_installed(_fake(extra="")) == (
        "trainer 'nosuch' needs the 'no_such_wrapper_pkg' package, which is not installed: "
        "install the package that provides 'no_such_wrapper_pkg'")


def test_a_bundled_adapter_under_another_name_needs_its_wrapper_all_the_same():
    conf = trainers.bundled_trainers()["hf_trainer"]
    renamed = _fake(_target_=conf._target_, name="my_hf", extra="", requires=[])
    assert trainers.requirements(renamed) == {"transformers": "hf", "accelerate": "hf"}


def test_an_installed_trainer_has_nothing_missing():
    assert trainers.not_installed(_fake(requires=["json"])) is None


# ------------------------------------------------------------------ the install command
@pytest.mark.parametrize("direct_url", [None, json.dumps({"url": "file:///tmp/evalkit-0.1.0-py3-none-any.whl",
                                                          "archive_info": {}}),
                                        json.dumps({"url": "file:///somewhere/else", "dir_info": {"editable": True}})])
def test_a_wheel_install_is_told_to_install_the_extra_from_the_index(monkeypatch, direct_url):
    monkeypatch.setattr(trainers, "_direct_urls", lambda: iter([direct_url]))
    assert trainers.install_command("lightning") == "pip install 'evalkit[lightning]'"


def test_an_editable_install_is_told_its_checkout(monkeypatch):
    checkout = Path(trainers.__file__).resolve().parents[2]
    editable = json.dumps({"url": checkout.as_uri(), "dir_info": {"editable": True}})
    monkeypatch.setattr(trainers, "_direct_urls", lambda: iter([None, editable]))
    assert trainers.install_command("lightning") == f"pip install -e '{checkout}[lightning]'"
