"""The one source of what a trainer needs (`evalkit.trainers`, read from the trainer YAMLs): pyproject's extra of
each bundled trainer holds its requirements, every place that tells a user to install a wrapper says the same thing,
and every reader derives a trainer's modules and distributions from its YAML."""
from __future__ import annotations

import re
import tomllib

import pytest
from helpers import REPO
from omegaconf import OmegaConf
from packaging.requirements import Requirement

from evalkit import trainers
from evalkit.contract import AdapterUnavailable
from evalkit.worker.run import load_adapter

BASELINE = trainers.bundled_trainers()["baseline"]
WRAPPERS = sorted(name for name, conf in trainers.bundled_trainers().items() if conf.requirements)


def _canonical(line: str) -> tuple[str, str]:
    requirement = Requirement(line)
    return re.sub(r"[-_.]+", "-", requirement.name).lower(), str(requirement.specifier)


# ------------------------------------------------------------------ pyproject and the trainer YAMLs
def test_each_wrapper_has_an_extra_admitting_its_cited_release_pinned_in_the_constraints():
    """pip reads extras from pyproject only: `.[<trainer>]` installs a range of the distributions
    conf/trainer/<trainer>.yaml requires, the range admitting the release its adapter cites (the YAML's pin), which
    constraints.txt pins for the README's commands and CI (issue 45); `.[all]` every bundled trainer's."""
    extras = {_extra(name): lines for name, lines in
              tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"].items()}
    pins = dict(_pinned(line) for line in (REPO / "constraints.txt").read_text().splitlines()
                if line.strip() and not line.startswith("#"))
    for name in WRAPPERS:
        cited = dict(_pinned(line) for line in trainers.bundled_trainers()[name].requirements)
        ranges = {_canonical(line)[0]: Requirement(line).specifier for line in extras.get(_extra(name), [])}
        assert sorted(ranges) == sorted(cited), f"pyproject's extra {name}: the distributions of {name}.yaml"
        for dist, version in cited.items():
            assert ranges[dist].contains(version) and "==" not in str(ranges[dist]), \
                f"pyproject's extra {name}: a range that admits {dist}=={version}, got {ranges[dist]}"
            assert pins.get(dist) == version, f"constraints.txt must pin {dist}=={version} ({name}.yaml's)"
    (everything,) = extras["all"]
    assert sorted(map(_extra, Requirement(everything).extras)) == sorted(map(_extra, WRAPPERS))


def _pinned(line: str) -> tuple[str, str]:
    """(canonical name, version) of a `name==version` line."""
    name, _, version = line.partition("==")
    return _canonical(name)[0], version.strip()


def _extra(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@pytest.mark.parametrize("name", WRAPPERS)
def test_a_wrapper_is_pinned_and_names_the_modules_its_adapter_imports(name):
    conf = trainers.bundled_trainers()[name]
    assert all("==" in line for line in conf.requirements), f"conf/trainer/{name}.yaml: pin {list(conf.requirements)}"
    assert conf.modules, f"conf/trainer/{name}.yaml requires {list(conf.requirements)} but names no module"
    assert trainers.wrapper_distribution(conf) == trainers.distributions(conf)[0]


def test_the_baseline_needs_nothing_and_comes_first():
    assert trainers.requirements(BASELINE) == trainers.modules(BASELINE) == trainers.distributions(BASELINE) == []
    assert trainers.wrapper_distribution(BASELINE) == "" and trainers.versions(BASELINE) == {}
    assert trainers.installed_trainers()[0][0] == "baseline"


def test_modules_and_distributions_are_derived_from_the_yaml():
    conf = trainers.bundled_trainers()["hf_trainer"]
    assert trainers.distributions(conf) == ["transformers", "accelerate"]
    assert trainers.packages(conf) == ["transformers", "accelerate"]      # what the preflight checks
    assert trainers.modules(conf)[0] == "transformers.trainer"


# ------------------------------------------------------------------ one message, wherever it is given
def _fake(**fields):
    return OmegaConf.create({"_target_": "no_such_wrapper_pkg.Adapter", "name": "nosuch", "mode": "aligned",
                             "requirements": ["no-such-wrapper==1.0"], "modules": ["no_such_wrapper_pkg.engine"],
                             "options": {}, **fields})


def test_every_hint_uses_the_same_command():
    message = ("trainer 'nosuch' needs the 'no_such_wrapper_pkg' package, which is not installed: "
               "pip install no-such-wrapper==1.0")
    assert trainers.not_installed(_fake()) == message
    with pytest.raises(AdapterUnavailable) as info:     # the worker, before it imports the adapter
        load_adapter(_fake())
    assert str(info.value) == message


def test_the_quick_evaluation_says_how_to_install_a_missing_wrapper(monkeypatch):
    monkeypatch.setattr(trainers, "bundled_trainers", lambda: {"baseline": BASELINE, "nosuch": _fake()})
    assert trainers.installed_trainers() == (["baseline"], {"nosuch": "pip install no-such-wrapper==1.0"})


def test_a_requirement_with_a_marker_is_quoted_for_the_shell():
    fake = _fake(requirements=["no-such-wrapper>=1.0,<2"])
    assert trainers.not_installed(fake).endswith("pip install 'no-such-wrapper>=1.0,<2'")
    assert trainers.distributions(fake) == ["no-such-wrapper"]


def test_a_module_no_requirement_brings_is_named():
    assert trainers.not_installed(_fake(requirements=[])) == (
        "trainer 'nosuch' needs the 'no_such_wrapper_pkg' package, which is not installed: "
        "install the package that provides 'no_such_wrapper_pkg'")


def test_a_bundled_adapter_under_another_name_needs_its_wrapper_all_the_same():
    conf = trainers.bundled_trainers()["hf_trainer"]
    renamed = _fake(_target_=conf._target_, name="my_hf", requirements=[], modules=[])
    assert trainers.requirements(renamed) == list(conf.requirements)
    assert trainers.modules(renamed) == list(conf.modules)


def test_an_installed_trainer_has_nothing_missing():
    assert trainers.not_installed(_fake(modules=["json.decoder"])) is None


def test_the_versions_recorded_are_the_requirements_installed_or_not():
    assert trainers.versions(_fake(requirements=["numpy>=1", "no-such-wrapper==1.0"])) == {
        "numpy": __import__("numpy").__version__, "no-such-wrapper": "not installed"}


def test_the_cited_release_is_the_wrappers_own_pin():
    bundled = trainers.bundled_trainers()
    assert trainers.cited_version(bundled["lightning"]) == "2.6.6"
    assert trainers.cited_version(bundled["hf_trainer"]) == "5.24.0"      # transformers, not accelerate
    assert trainers.cited_version(bundled["baseline"]) is None
