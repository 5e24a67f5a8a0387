"""The maintenance probe's local measurements on a fake installed wrapper: its dependency closure and bounds on
torch/numpy, its import cost in fresh processes, and the deprecation warnings it raises."""
from __future__ import annotations

import importlib.metadata as md
import json
import sys
import warnings

import pytest
from fake_envs import fake_env
from fakedist import FAKEWRAP
from omegaconf import OmegaConf
from packaging.specifiers import SpecifierSet

from evalkit import names
from evalkit.envs.store import env
from evalkit.observe.deprecations import DeprecationRecorder, module_for_file
from evalkit.probes.maintenance import measure
from evalkit.probes.maintenance.deps import (
    DistributionNotInstalled,
    dependency_closure,
    has_upper_bound,
    requirement_conflicts,
)
from evalkit.probes.maintenance.imports import import_cost


# ------------------------------------------------------------------ dependencies
def test_the_closure_is_transitive_skips_extras_sizes_files_and_lists_the_missing(fake_site):
    report = dependency_closure("FakeWrap", path=[str(fake_site)])
    assert (report.root, report.root_version) == ("fakewrap", "1.2.0")
    assert report.count == 2
    assert [(p.name, p.version, p.size_bytes) for p in report.packages] == [("fake-leaf", "0.1", None),
                                                                             ("fakedep", "1.0", 1234)]
    assert report.total_size_bytes == 1234 and report.unsized == ["fake-leaf"]
    metadata = fake_site / "fakewrap-1.2.0.dist-info" / "METADATA"
    assert report.root_size_bytes == len(FAKEWRAP) + metadata.stat().st_size
    missing = {(m.requirement, m.required_by) for m in report.missing}
    assert missing == {("torch<2.10", "fakewrap"), ('numpy<3; python_version >= "3"', "fakewrap"),
                       ("fakemissing>=0.1", "fakewrap"), ("torch~=2.13", "fakedep"), ("torch>=2.0", "fake-leaf")}
    assert not any("otherdep" in m.requirement for m in report.missing)
    json.dumps(report.as_dict())


def test_upper_bounds_on_torch_and_numpy_are_judged_against_the_installed_versions(fake_site):
    report = dependency_closure("fakewrap", path=[str(fake_site), *sys.path])
    torch_version, numpy_version = md.version("torch"), md.version("numpy")
    bounds = {(c.declared_by, c.package, c.specifier): (c.installed_version, c.satisfied) for c in report.constraints}
    assert bounds == {("fakewrap", "torch", "<2.10"): (torch_version, False),
                      ("fakewrap", "numpy", "<3"): (numpy_version, True),
                      ("fakedep", "torch", "~=2.13"): (torch_version, True)}
    assert "fakewrap requires torch<2.10, installed " + torch_version in [c.describe() for c in report.constraints]
    # The closure now runs on through the real torch and numpy; only the requirement nothing installs is missing.
    expected = {"fakedep", "fake-leaf", "torch", "numpy"}
    for real in ("torch", "numpy"):
        expected |= {p.name for p in dependency_closure(real).packages}
    assert {p.name for p in report.packages} == expected
    assert [m.requirement for m in report.missing] == ["fakemissing>=0.1"]


def test_a_root_that_is_not_installed_is_named_in_the_error(fake_site):
    with pytest.raises(DistributionNotInstalled, match="'nosuchwrap' is not installed"):
        dependency_closure("nosuchwrap", path=[str(fake_site)])


@pytest.mark.parametrize("spec,bounded", [("<2.10", True), ("<=2.9", True), ("==2.6.0", True), ("==2.*", True),
                                          ("~=2.13", True), ("===2.6.0", True), (">=2,!=2.5", False), ("", False)])
def test_upper_bound_operators(spec, bounded):
    assert has_upper_bound(SpecifierSet(spec)) is bounded


def test_conflicts_of_a_wrapper_that_is_not_installed():
    requires = ["torch<2.7.1,>=2.6.0", "NumPy>=1.21", "numpy<2.3; python_version < '3'", "torch<1; extra == 'x'",
                "pyyaml<7", "not a requirement !!"]
    conflicts = requirement_conflicts(requires, {"torch": "2.13.0", "numpy": "2.4.6"}, declared_by="composer")
    assert [(c.package, SpecifierSet(c.specifier), c.installed_version, c.satisfied) for c in conflicts] == [
        ("torch", SpecifierSet("<2.7.1,>=2.6.0"), "2.13.0", False)]
    text = conflicts[0].describe()
    assert text.startswith("composer requires torch<") and text.endswith(", installed 2.13.0")
    assert requirement_conflicts(["torch==2.13.0"], {"Torch": "2.13.0+cpu"}) == []     # a local build satisfies ==


def test_import_cost_refuses_nonsense_arguments():
    with pytest.raises(ValueError, match="repeats"):
        import_cost(["json"], repeats=0)
    with pytest.raises(ValueError, match="at least one module"):
        import_cost([])


# ------------------------------------------------------------------ deprecation warnings
def test_deprecations_are_attributed_to_the_module_that_raised_them(fakewrap, fake_site):
    with DeprecationRecorder() as recorder:
        for _ in range(3):
            fakewrap.old_api()            # one line: Python's default filter would show it once
        fakewrap.future_api()
        fakewrap.older_api()
        summary = recorder.summary()
    assert [(w.category, w.module, w.distribution, w.count) for w in summary] == [
        ("DeprecationWarning", "fakewrap", "fakewrap", 3),
        ("FakeDeprecation", "fakewrap", "fakewrap", 1),
        ("FutureWarning", "fakewrap", "fakewrap", 1)]
    first = summary[0]
    assert first.message == "old_api is deprecated, use new_api"
    assert len(first.attributed_to) == 1 and first.attributed_to[0].startswith(__file__ + ":")   # stacklevel=2
    assert recorder.total == 5
    json.dumps([w.as_dict() for w in summary])


def test_other_warnings_reach_the_previous_handler_unchanged(fakewrap):
    seen = []
    with warnings.catch_warnings():
        warnings.simplefilter("always", UserWarning)
        warnings.showwarning = lambda *args: seen.append(args)
        handler = warnings.showwarning
        with DeprecationRecorder() as recorder:
            fakewrap.shaky()
            fakewrap.old_api()
        assert warnings.showwarning is handler
        fakewrap.old_api()                # after the recorder: not recorded
    assert [(str(a[0]), a[1], a[2]) for a in seen] == [("shaky is experimental", UserWarning, __file__)]
    assert [(w.category, w.count) for w in recorder.summary()] == [("DeprecationWarning", 1)]


def test_other_warnings_reach_a_recording_catch_warnings(fakewrap):
    with warnings.catch_warnings(record=True) as log:
        warnings.simplefilter("always")
        with DeprecationRecorder() as recorder:
            fakewrap.shaky()
            fakewrap.old_api()
    assert [(str(w.message), w.category) for w in log] == [("shaky is experimental", UserWarning)]
    assert recorder.total == 1


def test_an_error_filter_for_other_warnings_still_raises(fakewrap):
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        with DeprecationRecorder() as recorder, pytest.raises(UserWarning, match="shaky"):
            fakewrap.shaky()
    assert recorder.total == 0


def test_module_for_file(fake_site, monkeypatch):
    monkeypatch.syspath_prepend(str(fake_site))
    assert module_for_file(str(fake_site / "fakewrap" / "__init__.py")) == "fakewrap"
    assert module_for_file(str(fake_site / "fakewrap" / "sub" / "mod.py")) == "fakewrap.sub.mod"
    assert module_for_file(str(fake_site / "fakewrap" / "ext.cpython-311-x86_64-linux-gnu.so")) == "fakewrap.ext"
    assert module_for_file("/nowhere-on-the-path/x.py") is None


# ------------------------------------------------------------------ a wrapper at another version (trainer.env)
def test_a_wrapper_in_its_environment_is_measured_there(tmp_path, monkeypatch):
    """`trainer.env`: the version, the dependencies and the import cost are the environment's, not evalkit's."""
    monkeypatch.setenv(names.ENVS_DIR_ENV, str(tmp_path))
    fake_env(tmp_path, "pytorch-ignite-0.4.11", requirements=["pytorch-ignite==0.4.11"],
             resolved={"pytorch-ignite": "0.4.11"})
    info = env("pytorch-ignite-0.4.11").site_packages / "pytorch_ignite-0.4.11.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pytorch-ignite\nVersion: 0.4.11\n")
    timed = []
    monkeypatch.setattr(measure, "import_cost", lambda modules, **kw: timed.append(kw["python"]) or
                        type("Cost", (), {"as_dict": lambda self: {}})())
    trainer = OmegaConf.create({"_target_": "x.Ignite", "name": "ignite", "env": "pytorch-ignite-0.4.11",
                                "requirements": ["pytorch-ignite==0.4.11"], "modules": ["ignite.engine"]})
    limits = {"index_url": "http://127.0.0.1:9", "offline": True, "import_repeats": 1, "candidates": []}
    out = measure.measure_environment(trainer, limits, cache_dir=str(tmp_path / "cache"))
    assert out["version"] == "0.4.11"
    assert out["dependencies"]["root_version"] == "0.4.11"
    assert timed == [str(env("pytorch-ignite-0.4.11").python)]
    missing = OmegaConf.merge(trainer, {"env": "pytorch-ignite-0.4.9"})
    assert "no such environment" in measure.measure_environment(missing, limits, str(tmp_path))["notes"][0]
