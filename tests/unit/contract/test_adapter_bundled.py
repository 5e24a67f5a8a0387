"""Every bundled adapter (`conf/trainer/*.yaml`, parametrized over `bundled_trainers()`) meets the contract in the
shape adapters/__init__.py describes: its class has fit() and effective_config() and states nothing its YAML states
(modules, distributions); its deviations are one typed list with unique codes, which is all `record_deviations`
accepts; its customizations are its own subclasses."""
from __future__ import annotations

import pytest
from hydra.utils import get_class

from evalkit.contract import Deviation, EffectiveConfig, WrapperAdapter, not_an_adapter
from evalkit.contract.effective import CODE
from evalkit.trainers import bundled_trainers, missing_module

TRAINERS = sorted(bundled_trainers())


def adapter_class(name: str) -> type:
    conf = bundled_trainers()[name]
    if missing_module(conf):
        pytest.skip(f"{name}'s wrapper is not installed ({missing_module(conf)})")
    return get_class(conf._target_)


@pytest.mark.parametrize("name", TRAINERS)
def test_the_adapter_class_is_an_adapter_and_leaves_what_it_needs_to_its_yaml(name):
    cls = adapter_class(name)
    assert not_an_adapter(cls, bundled_trainers()[name]._target_) is None
    for attribute in ("distributions", "preload_modules", "versions", "preload"):
        assert not hasattr(cls, attribute), f"{name}: {attribute} is its YAML's (requirements, modules)"


@pytest.mark.parametrize("name", TRAINERS)
def test_its_deviations_are_one_typed_list_with_unique_codes(name):
    cls = adapter_class(name)
    deviations = getattr(cls, "deviations", ())
    assert all(isinstance(d, Deviation) for d in deviations), name
    codes = [d.code for d in deviations]
    assert len(codes) == len(set(codes)), f"{name}: a code twice in {codes}"
    assert all(CODE.fullmatch(key) for key in getattr(cls, "aligns", {})), name


@pytest.mark.parametrize("name", TRAINERS)
def test_its_customizations_are_its_own_subclasses(name):
    cls = adapter_class(name)
    for kind, target in dict(bundled_trainers()[name].get("customizations") or {}).items():
        assert issubclass(get_class(target), cls), f"{name}'s {kind} customization {target}"


def test_only_the_listed_deviations_can_be_reported():
    class Listed(WrapperAdapter):
        deviations = (Deviation("clip.not_applied", "the quick start cannot clip"),)

    adapter = Listed(mode="defaults")
    adapter.record_deviations("clip.not_applied", "clip.not_applied")
    report = adapter.effective_config()
    assert isinstance(report, EffectiveConfig) and report.deviations == list(Listed.deviations)
    with pytest.raises(KeyError):
        adapter.record_deviations("lr.per_epoch")       # a text written outside the list does not exist
