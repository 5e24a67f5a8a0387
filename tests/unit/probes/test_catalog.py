"""The probes are found, not listed (evalkit.probes.catalog): each conf/probe YAML names its class and the schema of
its settings, the YAML is the one source of their values, a setting of another probe fails at compose time, each
probe's part in the presets is its own, and a new probe (a package and a YAML) is found without editing any other
file."""
from __future__ import annotations

import shutil
import sys

import pytest
from helpers import CONF, compose_config, numeric_settings
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

from evalkit import quick
from evalkit.config import PROBE_COMMON, ProbeConfig, choices, register_configs, validate
from evalkit.hydra_errors import error_line
from evalkit.presets import PRESETS, QUICK, plan_for, probe_overrides
from evalkit.probes import catalog
from evalkit.probes.catalog import load_probe, probe_from, probe_names, schemas

register_configs()
PROBES = probe_names()


def settings_of(name: str) -> list[str]:
    """The probe's own settings (nested ones dotted), from its schema."""
    return _leaves(OmegaConf.to_container(OmegaConf.structured(schemas()[name])), "")


def _leaves(tree: dict, prefix: str) -> list[str]:
    return [leaf for key, value in tree.items() if key not in PROBE_COMMON or prefix
            for leaf in (_leaves(value, f"{prefix}{key}.") if isinstance(value, dict) else [f"{prefix}{key}"])]


def refusal(compose, *overrides: str) -> str:
    """What evalkit says of a composition that fails: Hydra's error in one line."""
    with pytest.raises(ConfigCompositionException) as info:
        compose(*overrides)
    return error_line(info.value)


def test_the_bundled_probes_are_found_and_none_is_no_probe():
    assert {"semantics", "performance", "consistency", "functional", "stability", "customization",
            "maintenance"} <= set(PROBES) and "none" not in PROBES
    cfg = compose_config("probe=none")
    assert validate(cfg) == [] and OmegaConf.get_type(cfg.probe) is ProbeConfig and set(cfg.probe) == {*PROBE_COMMON}


@pytest.mark.parametrize("name", PROBES)
def test_each_probe_yaml_names_its_class_and_the_schema_of_its_settings_in_its_package(name):
    cfg = compose_config(f"probe={name}")
    probe, schema = load_probe(name), schemas()[name]
    assert validate(cfg) == [] and OmegaConf.get_type(cfg.probe) is schema and issubclass(schema, ProbeConfig)
    assert cfg.probe.name == probe.name == name and type(probe_from(cfg.probe._target_)) is type(probe)
    package = cfg.probe._target_.rsplit(".", 2)[0]
    assert schema.__module__.startswith(f"{package}.")                 # beside the probe, in its package
    assert all(callable(getattr(probe, method)) for method in ("task", "caliber", "plan", "judge"))
    assert isinstance(probe.dimension, str) and isinstance(probe.timed, bool)


@pytest.mark.parametrize("name", PROBES)
def test_the_yaml_is_the_one_source_of_each_settings_value(name):
    """The schema types and checks the settings and gives none a value; the YAML sets each one, nothing else."""
    bare = OmegaConf.structured(schemas()[name])
    assert OmegaConf.missing_keys(bare) == set(settings_of(name))
    written = OmegaConf.to_container(OmegaConf.load(CONF / "probe" / f"{name}.yaml"))
    del written["defaults"]
    assert sorted(_leaves(written, "")) == sorted(settings_of(name))
    assert set(written) >= set(PROBE_COMMON)


@pytest.mark.parametrize("name", PROBES)
def test_every_numeric_setting_of_a_probe_has_a_range_and_a_value_outside_it_is_refused(name):
    ranges = schemas()[name].ranges()
    assert sorted(numeric_settings(schemas()[name])) == sorted(ranges)
    for key, allowed in ranges.items():
        (message,) = validate(compose_config(f"probe={name}", f"probe.{key}={'[-1]' if allowed.items else -1}"))
        assert message.startswith(f"probe.{key}=") and "out of range" in message and f"e.g. probe.{key}=" in message


@pytest.mark.parametrize("name", PROBES)
def test_a_setting_of_another_probe_fails_at_compose_time_naming_the_probe_it_belongs_to(name):
    own = {key.split(".")[0] for key in settings_of(name)}
    foreign = {other: key for other in PROBES if other != name      # each other probe's first setting it lacks
               if (key := next((k for k in settings_of(other) if k.split(".")[0] not in own), None))}
    assert foreign or len(PROBES) == 1
    for other, key in foreign.items():
        said = refusal(compose_config, f"probe={name}", f"probe.{key}=1")
        assert said.startswith(f"probe.{key.split('.')[0]} is a setting of ") and f"probe={other}" in said, said
        assert f"not of probe={name}" in said and "\n" not in said


def test_another_probes_setting_added_with_plus_or_under_no_probe_is_refused_too():
    assert validate(compose_config("probe=semantics", "+probe.seeds=2")) == [
        "probe.seeds is a setting of probe=consistency, not of probe=semantics (probe=semantics has world_sizes, "
        "clip, optimizers, short_epoch, tokens): remove it, or run that probe"]
    assert refusal(compose_config, "probe=none", "probe.seeds=2").startswith(
        "probe.seeds is a setting of probe=consistency, not of probe=none (probe=none has no settings)")
    assert refusal(compose_config, "probe=semantics", "probe.world_size=[1]") == (
        "probe.world_size is not a setting of probe=semantics: did you mean probe.world_sizes?")
    assert refusal(compose_config, "probe=performance", "probe.performance.depth=[2]") == (
        "probe.performance.depth is not a setting: did you mean probe.performance.depths?")


@pytest.mark.parametrize("preset", sorted(PRESETS))
@pytest.mark.parametrize("name", PROBES)
def test_each_probes_part_in_a_preset_sets_only_its_own_settings(name, preset):
    plan = plan_for(PRESETS[preset], name)
    assert all(setting.startswith("probe.") for setting in plan.settings)
    assert quick.job_problems(probe_overrides(name, plan, ["lightning"], [])) == []


# ------------------------------------------------------------------ a new probe: one package, one YAML
TINY_SETTINGS = '''
from dataclasses import dataclass

from omegaconf import MISSING

from evalkit.config import AT_LEAST_1, ProbeConfig
from evalkit.presets import ProbePlan


@dataclass
class TinyProbeConfig(ProbeConfig):
    steps: int = MISSING

    @staticmethod
    def ranges():
        return {"steps": AT_LEAST_1}


PRESETS = {"quick": ProbePlan(["probe.steps=2"], ("aligned",), jobs_per_run=1)}
'''
TINY_PROBE = '''
from evalkit.probes.base import PlannedJob
from evalkit.probes.findings import ProbeResult


class TinyProbe:
    name = dimension = "tiny"
    timed = False

    def task(self, cfg):
        return "mlp_regression"

    def caliber(self, cfg):
        return f"tiny|steps={cfg.probe.steps}"

    def plan(self, cfg, done):
        return ([] if done else [PlannedJob("only", {"train.max_steps": cfg.probe.steps})]), []

    def judge(self, jobs):
        return ProbeResult("tiny", True)
'''
TINY_YAML = '''
defaults:
  - /tinyprobe.settings.TinyProbeConfig@_here_
  - _self_
_target_: tinyprobe.probe.TinyProbe
name: tiny
steps: 3
'''


@pytest.fixture
def tiny_probe(tmp_path, monkeypatch):
    """evalkit's conf as it is plus conf/probe/tiny.yaml, and the package `tinyprobe` on the path: a compose
    function over that conf."""
    package = tmp_path / "tinyprobe"
    package.mkdir()
    for module, text in (("__init__", ""), ("settings", TINY_SETTINGS), ("probe", TINY_PROBE)):
        (package / f"{module}.py").write_text(text)
    conf = tmp_path / "conf"
    shutil.copytree(CONF, conf, ignore=shutil.ignore_patterns("__pycache__"))
    (conf / "probe" / "tiny.yaml").write_text(TINY_YAML)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(catalog, "PROBE_CONF", conf / "probe")
    register_configs()

    def make(*overrides):
        with initialize_config_dir(str(conf), version_base=None):
            return compose("config", overrides=list(overrides))
    yield make
    for module in [m for m in sys.modules if m.split(".")[0] == "tinyprobe"]:
        del sys.modules[module]


def test_a_new_probe_is_a_package_and_a_yaml_found_without_editing_any_other_file(tiny_probe):
    assert "tiny" in probe_names() and "tiny" in choices()["probe.name"]
    cfg = tiny_probe("probe=tiny")
    assert validate(cfg) == [] and cfg.probe.steps == 3
    probe = probe_from(cfg.probe._target_)
    assert probe.caliber(cfg) == "tiny|steps=3" and probe.plan(cfg, {})[0][0].overrides == {"train.max_steps": 3}
    assert validate(tiny_probe("probe=tiny", "probe.steps=0")) == [
        "probe.steps=0 is out of range (allowed: >= 1): set it within that range, e.g. probe.steps=3"]
    assert refusal(tiny_probe, "probe=tiny", "probe.seeds=2").startswith(
        "probe.seeds is a setting of probe=consistency, not of probe=tiny (probe=tiny has steps)")
    assert refusal(tiny_probe, "probe=semantics", "probe.steps=2").startswith(
        "probe.steps is a setting of probe=tiny, not of probe=semantics")
    # evalkit-eval runs it with the rest, in its own plan
    assert "tiny" in quick.selected_probes("all") and quick.probes_problem("tiny") is None
    assert probe_overrides("tiny", plan_for(QUICK, "tiny"), ["fabric"], []) == [
        "probe=tiny", "trainer=fabric", "trainer.mode=aligned", "probe.steps=2"]


def test_no_module_of_the_verdict_names_a_probe_in_its_code():
    """The verdict reads every dimension from the catalog: no string constant of its code (docstrings apart) is a
    probe's name, and no function or class is named after one; what a bundled probe needs of the verdict it declares
    (`Dimension.words`, `sweep`, `differences`)."""
    import ast

    from helpers import REPO

    probes = set(probe_names())
    found = []
    for path in sorted((REPO / "src" / "evalkit" / "verdict").glob("*.py")):
        tree = ast.parse(path.read_text())
        docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                      if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef)) and n.body
                      and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            named = node.name if isinstance(node, (ast.FunctionDef, ast.ClassDef)) else None
            text = node.value if isinstance(node, ast.Constant) and id(node) not in docstrings else None
            if named in probes or (isinstance(text, str) and text in probes):
                found.append(f"{path.name}:{node.lineno}: {named or text}")
    assert found == []
