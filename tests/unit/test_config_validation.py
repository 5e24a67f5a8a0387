"""What Hydra's types let through is refused before anything is recorded (issue 8, items 4, 14, 15, 20, 22, 24).

Unit tests compose real configs with Hydra's compose API (no process); one real `evalkit` process per
refusal kind and one `evalkit-eval` process show the user-facing behaviour end to end.
"""
from __future__ import annotations

import inspect
import sys

import pytest
from helpers import compose_config, numeric_settings

from evalkit import quick
from evalkit.config import RANGES, SEED_LIMIT, EvalkitConfig, config_warnings, register_configs, validate
from evalkit.presets import QUICK
from evalkit.tasks.schemas import BUNDLED
from evalkit.trainers import bundled_trainers

register_configs()


def problems(*overrides: str) -> list[str]:
    return validate(compose_config(*overrides))


# ------------------------------------------------------------------ item 4 and 20: ranges
def test_the_bundled_configs_are_valid():
    for group, names in (("trainer", tuple(bundled_trainers())),
                         ("task", ("mlp_regression", "cnn_classification", "tiny_lm")),
                         ("precision", ("fp32", "bf16_mixed", "fp16_mixed")), ("hardware", ("cpu", "cuda", "auto")),
                         ("distributed", ("none", "ddp")), ("tracking", ("local", "server"))):
        for name in names:
            assert problems(f"{group}={name}") == [], f"{group}={name}"


def test_flipped_gradient_and_negative_warmup_are_refused_with_key_value_range_and_fix():
    found = problems("train.grad_clip=-1", "train.warmup_steps=-5")
    assert found == [
        "train.warmup_steps=-5 is out of range (allowed: >= 0): set it within that range, e.g. train.warmup_steps=5",
        "train.grad_clip=-1.0 is out of range (allowed: null or > 0): set it within that range, e.g. "
        "train.grad_clip=1.0"]


@pytest.mark.parametrize("override,allowed", [
    ("train.lr=0", "> 0"), ("train.lr=nan", "> 0"), ("tracking.flush_interval_s=inf", "> 0"),
    ("train.weight_decay=-0.1", ">= 0"),
    ("train.momentum=1", "in [0, 1)"), ("train.betas=[0.9,1.0]", "2 values, each in [0, 1)"),
    ("train.betas=[0.9]", "2 values, each in [0, 1)"), ("train.min_lr_ratio=1.5", "in [0, 1]"),
    ("train.batch_size=0", ">= 1"), ("train.grad_accum=0", ">= 1"), ("train.grad_clip=0", "null or > 0"),
    ("train.max_steps=0", ">= 1"), ("train.val_every=-1", ">= 0"), ("train.ckpt_every=-1", ">= 0"),
    ("train.num_workers=-1", ">= 0"), ("task.n_train=0", ">= 1"), ("task.n_val=0", ">= 1"),
    ("task.hidden=0", ">= 1"), ("task.depth=0", ">= 1"), ("task.in_dim=0", ">= 1"), ("task.out_dim=0", ">= 1"),
    ("task=tiny_lm task.n_heads=0", ">= 1"), ("task=tiny_lm task.vocab_size=0", ">= 1"),
    ("task=tiny_lm task.seq_len=0", ">= 1"), ("task=cnn_classification task.image_size=0", ">= 1"),
    ("task=cnn_classification task.channels=0", ">= 1"),
    ("task.noise=-0.5", ">= 0"), ("task.metric_margin=0", "> 0"), ("hardware.threads=-1", ">= 0"),
    ("distributed.world_size=0", ">= 1"),
    ("tracking.flush_interval_s=0", "> 0"), ("tracking.batch_size=1001", "in [1, 1000]"),
    ("tracking.batch_size=0", "in [1, 1000]"), ("tracking.progress_interval_s=-1", "> 0"),
    ("observe.warmup_steps=-1", ">= 0"), ("seed=-1", "in [0, 2**32)"), ("repeat=-1", "in [0, 2**63)"),
])
def test_each_out_of_range_value_is_one_message_naming_it(override, allowed):
    *task, override = override.split(" ")          # a task's own setting: under that task
    key, value = override.split("=")
    (message,) = problems(*task, override)
    assert message.startswith(f"{key}=") and f"(allowed: {allowed})" in message and f"e.g. {key}=" in message
    assert value.strip("[]").split(",")[-1] in message


def test_the_edges_of_each_range_are_accepted():
    assert problems("train.grad_clip=null", "train.momentum=0", "train.min_lr_ratio=1", "train.warmup_steps=0",
                    "train.val_every=0", "tracking.batch_size=1000", "tracking.batch_size=1", "task.noise=0",
                    f"seed={SEED_LIMIT - 1}", "hardware.threads=0", "observe.warmup_steps=0") == []


def test_a_huge_seed_and_an_empty_training_set_name_the_setting():    # item 20
    assert problems(f"seed={2**63}") == [f"seed={2**63} is out of range (allowed: in [0, 2**32)): set it within "
                                         "that range, e.g. seed=0"]
    assert problems("task.n_train=0") == ["task.n_train=0 is out of range (allowed: >= 1): set it within that "
                                          "range, e.g. task.n_train=2048"]


def test_every_numeric_setting_of_the_schema_has_a_range():
    """A probe's own settings: their ranges are its schema's (tests/unit/probes/test_catalog.py)."""
    fields = {*numeric_settings(EvalkitConfig), *(f for schema in BUNDLED.values() for f in numeric_settings(
        schema, "task."))}                       # each task's settings are its own schema's
    assert "train.grad_clip" in fields and "task.n_train" in fields and "task.n_heads" in fields and "seed" in fields
    assert sorted(fields) == sorted(RANGES)


@pytest.mark.parametrize("override,message", [
    ("train.optimizer=adamx", "train.optimizer=adamx is not one of adamw, adam, sgd: did you mean "
                              "train.optimizer=adam"),
    ("train.schedule=cosin", "train.schedule=cosin is not one of constant, linear, cosine: did you mean "
                             "train.schedule=cosine?"),
    ("trainer.mode=default", "trainer.mode=default is not one of aligned, defaults: did you mean "
                             "trainer.mode=defaults?"),
    ("precision.name=bf16", "precision.name=bf16 is not one of fp32, bf16_mixed, fp16_mixed: choose with the group "
                            "instead: precision=fp32|bf16_mixed|fp16_mixed"),
    ("hardware.device=gpu", "hardware.device=gpu is not one of cpu, cuda, auto: choose with the group instead: "
                            "hardware=cpu|cuda|auto"),
])
def test_a_value_outside_its_choices_is_refused(override, message):
    (found,) = problems(override)
    assert found.startswith(message)


def test_a_batch_larger_than_the_training_set_is_left_to_the_run():
    # A third-party task need not have task.n_train samples: the worker checks the real dataset and the
    # run fails with "lower train.batch_size" (tests/e2e/test_failures_and_tracking.py).
    assert problems("train.batch_size=4096", "task.n_train=256") == []


# ------------------------------------------------------------------ item 14: unknown keys
def test_a_key_added_with_plus_is_refused_with_the_closest_valid_key():
    assert problems("+train.max_step=5") == [
        "train.max_step is not a setting (evalkit would ignore it): did you mean train.max_steps?"]
    (top,) = problems("+sed=3")
    assert top.startswith("sed is not a setting") and "did you mean seed?" in top
    (far,) = problems("+observe.zzzz=1")
    assert "observe has sample_ids, params, warmup_steps" in far


def test_free_form_dicts_keep_accepting_new_keys():
    """`task.extra` is the third-party builder's (its signature checks it); `trainer.options` is the adapter's
    (tests/unit/contract/test_options.py), refused for an adapter that does not read the key."""
    assert problems(*THIRD_PARTY, "+task.extra.root=/data") == []
    (found,) = problems("+trainer.options.enable_progress_bar=true")
    assert found.startswith("trainer.options.enable_progress_bar is not an option of BaselineAdapter")


# ------------------------------------------------------------------ each task's own settings
THIRD_PARTY = ["task=third_party", "task._target_=logging.basicConfig", "task.name=mine"]   # takes **kwargs


def test_another_tasks_setting_added_with_plus_is_refused_naming_the_tasks_settings():
    assert problems("+task.n_heads=2") == [
        "task.n_heads is not a setting (evalkit would ignore it): remove it; task has _target_, name, metric_margin, "
        "n_train, n_val, in_dim, hidden, depth, out_dim, noise, dropout, batchnorm"]
    assert problems("task=tiny_lm", "+task.nheads=2") == [
        "task.nheads is not a setting (evalkit would ignore it): did you mean task.n_heads?"]
    assert problems("+task.extra.root=/data") == [
        "task.extra is not a setting (evalkit would ignore it): remove it; task has _target_, name, metric_margin, "
        "n_train, n_val, in_dim, hidden, depth, out_dim, noise, dropout, batchnorm"]


def test_a_third_party_builder_gets_extra_as_keywords_and_a_typo_there_is_refused():
    mlp = ["task=third_party", "task._target_=evalkit.tasks.catalog.mlp_regression", "task.name=mlp",
           *(f"+task.extra.{k}={v}" for k, v in (("n_train", 64), ("n_val", 32), ("in_dim", 4), ("hidden", 8),
                                                  ("depth", 1), ("out_dim", 1)))]
    assert problems(*mlp, "+task.extra.noise=0.1") == []
    signature = ("evalkit.tasks.catalog.mlp_regression(seed, *, n_train, n_val, in_dim, hidden, depth, out_dim, noise, "
                 "dropout, batchnorm)")
    assert problems(*mlp, "+task.extra.nois=0.1") == [
        f"task.extra.nois is not an argument of {signature}: did you mean task.extra.noise?",
        "evalkit.tasks.catalog.mlp_regression needs the argument noise: set task.extra.noise"]


def test_a_builder_that_does_not_take_the_tasks_settings_is_refused():
    found = problems("task._target_=evalkit.tasks.catalog.tiny_lm")       # mlp_regression's settings
    signature = "evalkit.tasks.catalog.tiny_lm(seed, *, n_train, n_val, vocab_size, seq_len, hidden, depth, n_heads)"
    assert found[0] == f"task.in_dim is not an argument of {signature}: remove it"
    assert found[-1] == "evalkit.tasks.catalog.tiny_lm needs the argument n_heads: set task.n_heads"
    assert len(found) == 8      # in_dim, out_dim, noise, dropout, batchnorm refused; vocab_size, seq_len, n_heads
    #                             missing


BUILDERS = """
import functools

def plain(seed, /, n_train, n_val=8, *rest, width, depth=2, **more): ...

def keywords(seed, *, n_train, n_val, noise=0.1): ...

@functools.lru_cache
def decorated(seed, *, size): ...

def twice(seed, *, a): ...

def twice(seed, *, b): ...

def made(seed, *, a): ...
made_too = made
"""


def test_a_builders_parameters_are_read_from_its_source_as_inspect_reads_them(tmp_path, monkeypatch):
    """Checking a config must not import the builder's module (the bundled tasks import torch, a second of
    every command); read from the source, the parameters are what inspect would give, and a builder the source
    cannot tell (decorated, defined twice, bound by assignment) is imported."""
    from evalkit.tasks.schemas import builder_parameters

    (tmp_path / "planted_builders.py").write_text(BUILDERS)
    monkeypatch.syspath_prepend(str(tmp_path))
    shape = lambda params: [(p.name, p.kind, p.default is p.empty) for p in params.values()]  # noqa: E731
    read = {name: shape(builder_parameters(f"planted_builders.{name}")) for name in ("plain", "keywords")}
    assert "planted_builders" not in sys.modules                                   # read, not imported
    import planted_builders

    for name in ("plain", "keywords"):
        assert read[name] == shape(inspect.signature(getattr(planted_builders, name)).parameters), name
    del sys.modules["planted_builders"]
    for name in ("decorated", "twice", "made_too"):
        assert shape(builder_parameters(f"planted_builders.{name}")) == shape(
            inspect.signature(getattr(planted_builders, name)).parameters), name
    assert builder_parameters("planted_builders.nowhere") is None
    assert builder_parameters("no_such_module_here.build") is None


def test_a_third_party_task_without_a_builder_or_a_name_says_so():
    assert problems("task=third_party") == ["task._target_ has no value: set it (task._target_=...)",
                                            "task.name has no value: set it (task.name=...)"]


# ------------------------------------------------------------------ item 22: warnings
def test_a_warmup_covering_every_step_is_a_warning_not_an_error():
    cfg = compose_config("train.max_steps=5")           # the 5-step smoke run with the default warm-up of 5
    assert validate(cfg) == []
    (warning,) = config_warnings(cfg)
    assert warning.startswith("observe.warmup_steps=5 >= train.max_steps=5") and "no throughput" in warning
    assert "observe.warmup_steps=0" in warning
    assert config_warnings(compose_config("train.max_steps=6")) == []


def test_an_lr_warmup_longer_than_the_run_is_a_warning():
    """Issue 48: train.warmup_steps > train.max_steps was accepted without a word (the LR never reaches train.lr)."""
    cfg = compose_config("train.max_steps=20", "train.warmup_steps=50")
    (warning,) = config_warnings(cfg)
    assert warning.startswith("train.warmup_steps=50 > train.max_steps=20: the learning rate never reaches")
    assert "(its last step runs at 40% of it)" in warning and "train.warmup_steps to at most 20" in warning
    assert config_warnings(compose_config("train.max_steps=20", "train.warmup_steps=20")) == []


# ------------------------------------------------------------------ item 15: evalkit-eval checks first
def test_eval_refuses_zero_seeds_and_unknown_scenarios_before_anything(capsys):
    assert quick.main(["--seeds", "0"]) == 2
    assert "evalkit-eval: --seeds 0: each arm needs at least one seed" in capsys.readouterr().err
    assert quick.main(["--scenario", "nosuch"]) == 2
    assert "--scenario 'nosuch' unknown; choose from balanced, platform, research" in capsys.readouterr().err


def test_eval_answers_a_misspelled_trainer_with_the_nearest_and_the_list(capsys):
    """Issue 48: `--trainers lightnig` said 'no such trainer' and nothing else."""
    assert quick.main(["--trainers", "lightnig"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "lightnig: no such trainer, did you mean lightning?" in err[0], err
    assert "choose from baseline, " in err[0] and "lightning" in err[0].rsplit("choose from", 1)[1]


def test_eval_composes_every_job_and_validates_it():
    def check(*extra):
        return quick.job_problems(quick.sweep_overrides(QUICK, ["baseline", "lightning"], [4], list(extra)))

    assert check() == [] and check("precision=fp32,bf16_mixed") == []
    assert check("train.max_stepz=3") == ["bad override: train.max_stepz is not a setting: did you mean "
                                          "train.max_steps?"]
    assert check("train.grad_clip=-1") == ["invalid config: train.grad_clip=-1.0 is out of range (allowed: null "
                                           "or > 0): set it within that range, e.g. train.grad_clip=1.0"]
    assert check("precision=fp32,fp8")[0].startswith("bad override: In 'config': Could not find 'precision/fp8'")
    assert check("train.lr=[1")[0].startswith("bad override: ")
    assert check("+train.max_step=5") == ["invalid config: train.max_step is not a setting (evalkit would ignore "
                                          "it): did you mean train.max_steps?"]


def test_eval_gives_a_probes_setting_only_to_the_sweeps_of_the_probes_that_have_it():
    overrides = ["probe.seeds=2", "+probe.world_sizes=[1]", "train.lr=0.01"]
    assert quick.for_sweep(overrides, None) == ["train.lr=0.01"]                 # the training sweep: no probe
    assert quick.for_sweep(overrides, "consistency") == ["probe.seeds=2", "train.lr=0.01"]
    assert quick.for_sweep(overrides, "stability") == ["+probe.world_sizes=[1]", "train.lr=0.01"]
    assert quick.probes_problem("all", overrides) is None
    assert quick.probes_problem("semantics", overrides) == ("probe.seeds=2: a setting of probe=consistency, which "
                                                            "--probes semantics does not run")
    assert quick.probes_problem("all", ["probe.seedz=2"]) == "probe.seedz=2: no probe has this setting"


def test_eval_stops_when_the_sweep_fails_before_any_job_is_recorded(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("EVALKIT_DEFAULT_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.setattr(quick, "run_sweep", lambda overrides: 1)
    assert quick.main(["--trainers", "baseline", "--seeds", "1"]) == 1
    err = capsys.readouterr().err
    assert "evalkit-eval: the training sweep failed before any job was recorded (exit code 1" in err
    assert "training done" not in err and not (tmp_path / "mlflow.db").exists()
