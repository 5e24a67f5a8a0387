"""Composition: typos and wrong types fail at compose time with Hydra's message; every target binds, and each
task's YAML holds exactly its builder's keyword arguments."""
from __future__ import annotations

import dataclasses
import inspect

import pytest
from helpers import CONF, compose_config
from hydra.errors import ConfigCompositionException, MissingConfigException
from hydra.utils import get_class, get_method
from omegaconf import OmegaConf
from omegaconf.errors import ConfigAttributeError, ValidationError

from evalkit.config import register_configs
from evalkit.contract.adapter_class import ADAPTER_METHODS
from evalkit.tasks.schemas import BUNDLED, COMMON, builder_arguments

register_configs()


def test_defaults_compose():
    cfg = compose_config()
    assert cfg.trainer.name == "baseline" and cfg.task.name == "mlp_regression" and cfg.precision.name == "fp32"


@pytest.mark.parametrize("overrides,message,cause,cause_message", [
    (["train.max_stepz=3"], "Could not override 'train.max_stepz'", ConfigAttributeError,
     "Key 'max_stepz' not in 'TrainConfig'"),
    (["train.max_steps=many"], "Error merging override train.max_steps=many", ValidationError,
     "Value 'many' of type 'str' could not be converted to Integer\n    full_key: train.max_steps"),
    (["task.n_headz=2"], "Could not override 'task.n_headz'", ConfigAttributeError,
     "Key 'n_headz' not in 'MlpRegressionTask'"),
    (["task=tiny_lm", "task.noise=0.5"], "Could not override 'task.noise'", ConfigAttributeError,   # mlp's, not its
     "Key 'noise' not in 'TinyLmTask'"),
    (["task=cnn_classification", "task.image_size=big"], "Error merging override task.image_size=big",
     ValidationError, "Value 'big' of type 'str' could not be converted to Integer\n    full_key: task.image_size"),
    (["distributed.backend=gloo"], "Could not override 'distributed.backend'", ConfigAttributeError,
     "Key 'backend' not in 'DistributedConfig'"),
])
def test_bad_overrides_fail_at_compose_time(overrides, message, cause, cause_message):
    with pytest.raises(ConfigCompositionException, match=f"^{message}") as info:
        compose_config(*overrides)
    assert isinstance(info.value.__cause__, cause) and str(info.value.__cause__).startswith(cause_message)


def test_an_unknown_group_option_lists_the_options():
    with pytest.raises(MissingConfigException, match="Could not find 'precision/fp8'\n\nAvailable options in "
                                                     "'precision':\n\tbf16_mixed\n\tfp16_mixed\n\tfp32\n"):
        compose_config("precision=fp8")


@pytest.mark.parametrize("yaml", sorted((CONF / "trainer").glob("*.yaml")), ids=lambda p: p.stem)
def test_every_trainer_target_binds_the_adapter_signature(yaml):
    cfg = compose_config(f"trainer={yaml.stem}")
    cls = get_class(cfg.trainer._target_)
    params = inspect.signature(cls).parameters
    assert "mode" in params and "options" in params
    for method in ADAPTER_METHODS:
        assert callable(getattr(cls, method))


@pytest.mark.parametrize("yaml", sorted((CONF / "task").glob("*.yaml")), ids=lambda p: p.stem)
def test_every_task_yaml_holds_exactly_its_builders_keyword_arguments(yaml):
    cfg = compose_config(f"task={yaml.stem}")
    builder = get_method(cfg.task._target_)
    params = inspect.signature(builder).parameters
    keywords = [name for name, p in params.items() if p.kind is p.KEYWORD_ONLY]
    assert list(params) == ["seed", *keywords]                       # the seed, then its own keywords only
    assert OmegaConf.get_type(cfg.task) is BUNDLED[yaml.stem]         # the YAML names its schema
    assert [f.name for f in dataclasses.fields(BUNDLED[yaml.stem])] == [*COMMON, *keywords]
    written = set(OmegaConf.load(yaml)) - {"defaults"}
    assert set(keywords) <= written <= {*COMMON, *keywords}          # the YAML sets every argument, nothing else
    assert builder_arguments(cfg.task) == {k: cfg.task[k] for k in keywords}
    assert builder(0, **{**builder_arguments(cfg.task), "n_train": 8, "n_val": 8}).name == yaml.stem


def test_every_bundled_schema_has_its_yaml():
    assert sorted(BUNDLED) == sorted(p.stem for p in (CONF / "task").glob("*.yaml"))


def test_a_launcher_failure_is_one_line_and_anything_else_keeps_its_stack_trace():
    from joblib.externals.loky.process_executor import TerminatedWorkerError

    from evalkit.hydra_errors import report

    lost = TerminatedWorkerError("A worker process managed by the executor was unexpectedly terminated.\n\n"
                                 "The exit codes of the workers are {SIGKILL(-9)}")
    assert report(lost) == ("evalkit: the launcher failed: TerminatedWorkerError: A worker process managed by the "
                            "executor was unexpectedly terminated. The exit codes of the workers are {SIGKILL(-9)}")
    try:
        {}["missing"]
    except KeyError as exc:
        bug = report(exc)
    assert bug.startswith("Traceback (most recent call last):") and bug.endswith("KeyError: 'missing'")
