"""Resume compatibility (a checkpoint continues only the run that wrote it), adapter class checks, and secret
redaction by value shape. Pure functions on fabricated configs; a few real runs on one tiny baseline job."""
from __future__ import annotations

import functools
import json
import os
import sys

import pytest
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from evalkit.config import register_configs
from evalkit.contract import NotAnAdapter, adapter_class_problem
from evalkit.controller.job.resume_check import (
    check_resume,
    checkpoint_step,
    refusal,
    resume_mismatches,
    resume_source,
    resume_tags,
)
from evalkit.controller.tracking import flatten
from evalkit.secrets import REDACTED, redact, redact_override, redact_text
from evalkit.worker.run import load_adapter

register_configs()


@functools.lru_cache(maxsize=None)
def _config(*overrides: str) -> dict:
    """The resolved config of `evalkit <overrides>` (cached: callers only read it)."""
    with initialize_config_module("evalkit.conf", version_base=None):
        return OmegaConf.to_container(compose("config", overrides=list(overrides)), resolve=True)


# ------------------------------------------------------------------ item 10: what must match to resume
@pytest.mark.parametrize("override,what,fix", [
    ("seed=1", "seed=1, but the checkpoint was written with seed=0", "seed=0"),
    ("train.batch_size=16", "train.batch_size=16, but the checkpoint was written with train.batch_size=32",
     "train.batch_size=32"),
    ("train.grad_accum=2", "train.grad_accum=2, but", "train.grad_accum=1"),
    ("distributed=ddp", "distributed.world_size=2, but", "distributed.world_size=1"),
    ("precision=bf16_mixed", "precision.name=bf16_mixed, but the checkpoint was written with precision.name=fp32",
     "precision.name=fp32"),
    ("train.optimizer=sgd", "train.optimizer=sgd, but", "train.optimizer=adamw"),
    ("train.lr=0.01", "train.lr=0.01, but", "train.lr=0.001"),
    ("train.betas=[0.9,0.99]", "train.betas=[0.9,0.99], but", "train.betas=[0.9,0.999]"),
    ("train.schedule=linear", "train.schedule=linear, but", "train.schedule=cosine"),
    ("train.warmup_steps=2", "train.warmup_steps=2, but", "train.warmup_steps=5"),
    ("train.grad_clip=null", "train.grad_clip=null, but", "train.grad_clip=1.0"),
    ("task.n_train=64", "task.n_train=64, but", "task.n_train=2048"),
    ("task=tiny_lm", "task.name=tiny_lm, but", "task.name=mlp_regression"),
    ("trainer=ignite", "it was written by trainer baseline (evalkit.adapters.baseline.BaselineAdapter), this job runs "
                       "ignite (evalkit.adapters.ignite_engine.IgniteAdapter)", "trainer=baseline"),
    ("trainer.mode=defaults", "trainer.mode=defaults, but", "trainer.mode=aligned"),
    ("train.max_steps=3", "train.max_steps=3 is not above the checkpoint's step 5", "train.max_steps=100"),
    ("train.max_steps=200", "train.max_steps=200, but the checkpoint's cosine schedule decays over "
                            "train.max_steps=100", "train.max_steps=100"),
])
def test_a_setting_that_shaped_the_checkpoint_must_match(override, what, fix):
    found = resume_mismatches(_config(override), _config(), step=5)
    assert any(m.what.startswith(what) and m.fix == fix for m in found), found


@pytest.mark.parametrize("override", ["train.val_every=7", "train.ckpt_every=3", "train.num_workers=1",
                                      "task.metric_margin=0.05", "observe.warmup_steps=0", "repeat=1",
                                      "hardware=auto", "tracking.experiment=other", "run_name=again"])
def test_cadences_hardware_and_recording_may_change(override):
    assert resume_mismatches(_config(override), _config(), step=5) == []


def test_a_constant_schedule_may_extend_but_must_go_beyond_the_checkpoint():
    old = _config("train.schedule=constant", "train.max_steps=10")
    assert resume_mismatches(_config("train.schedule=constant", "train.max_steps=20"), old, step=10) == []
    (short,) = resume_mismatches(_config("train.schedule=constant", "train.max_steps=10"), old, step=10)
    assert short.fix == "train.max_steps above 10"
    (ended,) = resume_mismatches(_config("train.max_steps=10"), _config("train.max_steps=10"), step=10)
    assert ended.fix == "an earlier checkpoint"      # a cosine run's last checkpoint continues nothing


def test_the_refusal_is_one_line_with_both_values_and_the_fix():
    message = refusal("/r/checkpoints/step_00000005.pt",
                      resume_mismatches(_config("seed=1", "train.batch_size=16"), _config(), step=5))
    assert "\n" not in message
    assert message == ("resume_from=/r/checkpoints/step_00000005.pt cannot continue the run that wrote it: seed=1, "
                       "but the checkpoint was written with seed=0; train.batch_size=16, but the checkpoint was "
                       "written with train.batch_size=32: resume with seed=0 and train.batch_size=32, or start "
                       "without resume_from")


def test_the_checkpoint_step_is_found_in_every_adapters_layout(tmp_path):
    layouts = {"baseline": ["step_00000005.pt", "step_00000010.pt", "step_00000015.pt.tmp-123"],
               "lightning": ["step_00000005.ckpt", "step_00000010.ckpt"],
               "ignite": ["checkpoint_5.pt", "checkpoint_10.pt"],
               "accelerate": ["step_00000005/", "step_00000010/"],
               "hf": ["checkpoint-5/", "checkpoint-10/", "runs/"]}
    for name, entries in layouts.items():
        folder = tmp_path / name
        folder.mkdir()
        for entry in entries:
            if entry.endswith("/"):
                (folder / entry).mkdir()
            else:
                (folder / entry).write_bytes(b"x")
        assert checkpoint_step(str(folder)) == 10, name                    # a directory: its latest
        first = entries[0].rstrip("/")
        assert checkpoint_step(str(folder / first)) == 5, name             # one checkpoint: its own step
    assert checkpoint_step(str(tmp_path / "baseline" / "elsewhere.bin")) is None


def _fake_run(root, config: dict, run_id: str = "abc123") -> str:
    """A run dir as Controller.train leaves it: job.json, run.json, checkpoints/step_00000005.pt."""
    ckpt_dir = root / "checkpoints"
    ckpt_dir.mkdir(parents=True)
    (ckpt_dir / "step_00000005.pt").write_bytes(b"x")
    (root / "job.json").write_text(json.dumps({"config": config, "ckpt_dir": "/moved/away/checkpoints"}))
    (root / "run.json").write_text(json.dumps({"run_id": run_id}))
    return str(ckpt_dir / "step_00000005.pt")


def test_the_source_job_is_found_beside_the_checkpoint_even_after_its_run_dir_moved(tmp_path):
    path = _fake_run(tmp_path / "run", _config("train.max_steps=10"))
    source = resume_source(path)
    assert (source.run_dir, source.run_id, source.step) == (str(tmp_path / "run"), "abc123", 5)
    assert resume_source(os.path.dirname(path)).config["train"]["max_steps"] == 10
    assert resume_tags(OmegaConf.create({"resume_from": path})) == {
        "evalkit.resumed_from": path, "evalkit.resumed_from_run": "abc123", "evalkit.resumed_at_step": "5"}
    cfg = OmegaConf.create(_config("train.max_steps=10", "trainer=ignite", f"resume_from={path}"))
    assert ("written by trainer baseline (evalkit.adapters.baseline.BaselineAdapter), this job runs ignite"
            in check_resume(cfg))


def test_a_checkpoint_from_elsewhere_is_not_refused_but_warned_and_tagged(tmp_path, capsys):
    path = tmp_path / "step_00000005.pt"
    path.write_bytes(b"x")
    cfg = OmegaConf.create(_config("train.max_steps=10", f"resume_from={path}"))
    assert check_resume(cfg) is None
    assert "cannot be compared" in capsys.readouterr().err
    tags = resume_tags(cfg)
    assert tags["evalkit.resumed_at_step"] == "5" and "evalkit.resumed_from_run" not in tags
    assert "settings not compared" in tags["evalkit.resume_unchecked"]


# ------------------------------------------------------------------ item 17: a class that is not an adapter
def test_a_class_without_the_adapter_methods_is_refused_before_it_is_constructed():
    trainer = OmegaConf.create({"_target_": "collections.Counter", "name": "counter", "mode": "aligned",
                                "requirements": [], "modules": [], "options": {}})
    with pytest.raises(NotAnAdapter) as info:
        load_adapter(trainer)
    assert str(info.value) == (
        "trainer._target_=collections.Counter is not an evalkit adapter: Counter has no fit(), effective_config(); "
        "point trainer._target_ at a class with fit(job) and effective_config() (the Adapter protocol in "
        "evalkit/contract/adapter.py)")


def test_the_controller_checks_the_class_only_where_importing_it_imports_no_wrapper():
    import evalkit.controller.job.run  # noqa: F401 - a module the controller has imported already

    assert "is not an evalkit adapter" in adapter_class_problem("collections.Counter")   # standard library
    assert "Controller has no fit()" in adapter_class_problem("evalkit.controller.job.run.Controller")  # imported
    if "evalkit.adapters.ignite_engine" not in sys.modules:
        assert adapter_class_problem("evalkit.adapters.ignite_engine.IgniteAdapter") is None
        assert "evalkit.adapters.ignite_engine" not in sys.modules                                # left to the worker
    assert adapter_class_problem("nosuchpackage.Adapter") is None


# ------------------------------------------------------------------ item 19: secrets by value shape
SECRETS = [
    "hf_aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3x", "ghp_Zy9Xw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcBa",
    "gho_16C7e42F292c6912E7710c838347Ae178B4a", "github_pat_11ABCDEFG0abcdefghijkl_mnopqrstuvwxyz0123456789ABCDEF",
    "sk-proj-Ab3De5Gh7Jk9Mn1Pq3St5Vw7Yz9", "sk-ant-api03-abcdEFGH1234ijklMNOP5678", "AKIAIOSFODNN7EXAMPLE",
    "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "XlGMvtd7AzbQHnDHFZ+ph8aebsoJ2dGP", "gNkTgA23cey-CgVoAODrSrXph60f9UUr4ZP3",   # base64, base64url
    "3f786850e387550fdab836ed7e6dc881de23001b1c5e",                                  # long hex, neutral key
]
NOT_SECRETS = [
    "/home/Alice/Projects/Model2024/checkpoints/step_00000005.pt", "evalkit.adapters.accelerate_loop.AccelerateAdapter",
    "sqlite:////tmp/pytest-of-root/pytest-0/test_resume0/mlflow.db", "http://mlflow.example.com:5000/",
    "4642a55cc4ca40c7a6c325707289a64b", "1083f8bd-d334-427c-9b01-19c8048bbf51",        # run id, UUID
    "ResNet50ImageNetPretrainedCheckpointV2", "my_very_long_experiment_name_2024_v3_final_run",
    "MLFLOW_TRACKING_URI_default_for_experiment12", "bert-base-uncased-finetuned-sst2-v2-lr3e-5",
    "run-sk-learn-classifier-benchmark-2024", "hf_trainer_options_default_config", "0.001", "1e-3",
    "outputs/2025-01-01/12-00-00-abc123", "12345678901234567890123456789012345",
]


@pytest.mark.parametrize("secret", SECRETS)
def test_a_token_shaped_value_is_redacted_under_any_key_and_inside_text_and_lists(secret):
    assert redact_text(secret) == REDACTED
    assert redact_text(f"--flag {secret} --other") == f"--flag {REDACTED} --other"
    assert redact({"note": secret, "many": ["plain", secret]}) == {"note": REDACTED, "many": ["plain", REDACTED]}
    assert secret not in json.dumps(flatten({"trainer": {"options": {"note": secret, "many": [1, secret]}}}))


@pytest.mark.parametrize("value", NOT_SECRETS)
def test_an_ordinary_value_is_kept(value):
    assert redact_text(value) == value and redact({"x": [value]}) == {"x": [value]}


def test_only_the_password_of_a_url_is_masked_and_a_hash_is_kept_under_a_key_naming_one():
    assert redact_text("https://bob:hunter2@example.com:5000/x") == f"https://bob:{REDACTED}@example.com:5000/x"
    assert redact_text("postgresql://bob:p@ss@db:5432/mlflow") == f"postgresql://bob:{REDACTED}@db:5432/mlflow"
    assert redact_text("Authorization: Bearer abc123def456") == f"Authorization: Bearer {REDACTED}"
    commit = "11f6ad8ec52a2984abaafd7c3b516503785c2072"
    assert redact({"git_commit": commit, "sha": commit, "note": commit}) == \
        {"git_commit": commit, "sha": commit, "note": REDACTED}
    assert flatten({"source": {"commit": commit}}) == {"source.commit": commit}
    assert redact({"hub_token": "anything", "steps": 5}) == {"hub_token": REDACTED, "steps": 5}   # by key, as before


@pytest.mark.parametrize("key,secret", [("hub_token", True), ("HF_TOKEN", True), ("auth_token", True),
                                        ("api_key", True), ("db_password", True), ("pad_token_id", False),
                                        ("token_type_ids", False), ("max_new_tokens", False),
                                        ("average_tokens_across_devices", False), ("tokenizer_name", False)])
def test_a_credential_key_is_not_a_count_or_id_of_tokens(key, secret):
    """The wrappers' effective configs pass through `redact` too: a transformers Trainer setting such as
    average_tokens_across_devices must stay readable."""
    assert (redact({key: "x"})[key] == REDACTED) is secret


def test_a_command_line_override_keeps_its_key_and_loses_its_secret():
    token = "hf_aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3x"
    assert redact_override(f"+trainer.options.note={token}") == f"+trainer.options.note={REDACTED}"
    assert redact_override("trainer.options.hub_token=abc") == f"trainer.options.hub_token={REDACTED}"
    assert redact_override("seed=0,1") == "seed=0,1" and redact_override("--multirun") == "--multirun"
