"""Sweeps that can be resumed: a job's fingerprint is its resolved config without the tracking settings and the
versions it runs with (the wrapper's, torch's, evalkit's, a probe run's judges'), and a sweep re-run with
`sweep.resume=true` keeps the FINISHED runs of the same fingerprint, runs FAILED ones again and those of the same
config at other versions (saying which), lists what it kept on its parent, and the verdict of the new sweep reads
the kept runs with its own."""
from __future__ import annotations

from omegaconf import OmegaConf

from evalkit.controller.job.fingerprint import fingerprint

TINY = ["trainer=baseline", "task.n_train=64", "task.n_val=16", "train.max_steps=8", "train.val_every=4"]


def _config(*overrides):
    from hydra import compose, initialize_config_module

    from evalkit.config import register_configs

    register_configs()
    with initialize_config_module("evalkit.conf", version_base=None):
        return compose("config", overrides=list(overrides))


def test_the_fingerprint_ignores_where_a_job_records_and_nothing_it_does():
    base = fingerprint(_config(*TINY))
    assert len(base) == 16
    assert fingerprint(_config(*TINY, "tracking.uri=http://elsewhere:5000", "tracking.flush_interval_s=3",
                               "sweep.resume=true", "run_name=mine")) == base
    nodes = ["distributed=ddp", "distributed.world_size=2", "distributed.nnodes=2", "distributed.shared_dir=/nfs/j"]
    node0 = fingerprint(_config(*TINY, *nodes))      # every node of one job reads node 0's, wherever they meet
    assert fingerprint(_config(*TINY, *nodes, "distributed.node_rank=1", "distributed.master_addr=10.0.0.2",
                               "distributed.master_port=29400", "distributed.shared_dir=/lustre/j",
                               "distributed.node_timeout_s=60")) == node0
    assert fingerprint(_config(*TINY, *nodes[:2])) not in (node0, base)     # one node: the ranks split otherwise
    assert fingerprint(_config(*TINY, "train.lr=0.01")) != base
    assert fingerprint(_config(*TINY, "seed=1")) != base
    assert fingerprint(_config(*TINY, "faults.kill_after_step=3")) != base


def test_a_wrapper_at_another_version_is_another_job_and_no_env_keeps_the_fingerprints_of_before():
    base = fingerprint(_config(*TINY))
    assert fingerprint(_config(*TINY, "trainer.env=lightning-2.5.2")) != base
    plain = OmegaConf.create(OmegaConf.to_container(_config(*TINY)))
    del plain.trainer["env"]                      # a config of before trainer.env existed
    assert fingerprint(plain) == base


def _installed(monkeypatch, **pinned):
    """The installed version of each distribution named in `pinned` (`lightning="2.5.3"`), the others' as they are."""
    from importlib import metadata

    real = metadata.version
    monkeypatch.setattr(metadata, "version", lambda name: pinned.get(name) or real(name))


def test_an_upgraded_wrapper_torch_or_evalkit_is_another_fingerprint(monkeypatch):
    """Issue 44: the same config under another installed lightning (or torch, or evalkit) is another job."""
    lightning = _config(*TINY, "trainer=lightning")
    _installed(monkeypatch, lightning="2.5.3")
    before = fingerprint(lightning)
    _installed(monkeypatch, lightning="2.6.6")
    assert fingerprint(lightning) != before
    now = fingerprint(lightning)
    _installed(monkeypatch, torch="2.12.0")
    assert fingerprint(lightning) != now
    _installed(monkeypatch, evalkit="0.0.9")
    assert fingerprint(lightning) != now


def test_a_resumed_sweep_runs_a_job_recorded_with_another_wrapper_version_again_and_says_why(monkeypatch, tmp_path,
                                                                                          capsys):
    """Issue 44: a FINISHED run of the same config under lightning 2.5.3 is not reused under 2.6.6, and stderr names
    both versions; under the version it recorded it is reused."""
    from mlflow.tracking import MlflowClient

    from evalkit import names
    from evalkit.controller.job.run import reuse_finished, run_tags

    cfg = _config(*TINY, "trainer=lightning", "sweep.resume=true", f"tracking.uri=sqlite:///{tmp_path / 'm.db'}")
    client = MlflowClient(cfg.tracking.uri)
    exp = client.create_experiment(cfg.tracking.experiment, artifact_location=(tmp_path / "a").as_uri())
    _installed(monkeypatch, lightning="2.5.3")
    run = client.create_run(exp, tags=run_tags(cfg, None)).info.run_id
    client.set_terminated(run, "FINISHED")
    assert reuse_finished(cfg, names.ROLE_JOB).run_id == run          # the same versions: kept
    capsys.readouterr()
    _installed(monkeypatch, lightning="2.6.6")
    assert reuse_finished(cfg, names.ROLE_JOB) is None
    assert f"sweep.resume: run {run} was recorded with lightning 2.5.3, now 2.6.6: run again" \
        in capsys.readouterr().err


def test_a_job_in_an_environment_holds_the_environments_wrapper_version_not_evalkits(monkeypatch, tmp_path):
    """With trainer.env the workers import the environment's wrapper: evalkit's own upgraded beside it changes
    nothing; the environment's changes the fingerprint."""
    from fake_envs import fake_env

    from evalkit import names
    from evalkit.controller.job.fingerprint import versions
    from evalkit.envs.store import env

    monkeypatch.setenv(names.ENVS_DIR_ENV, str(tmp_path))
    fake_env(tmp_path, "pytorch-ignite-0.4.11", requirements=["pytorch-ignite==0.4.11"])
    site = env("pytorch-ignite-0.4.11").site_packages / "pytorch_ignite-0.4.11.dist-info"
    site.mkdir(parents=True)
    (site / "METADATA").write_text("Metadata-Version: 2.1\nName: pytorch-ignite\nVersion: 0.4.11\n")
    cfg = _config(*TINY, "trainer=ignite", "trainer.env=pytorch-ignite-0.4.11")
    assert versions(cfg)["pytorch-ignite"] == "0.4.11"
    before = fingerprint(cfg)
    _installed(monkeypatch, **{"pytorch-ignite": "9.9.9"})
    assert fingerprint(cfg) == before
    (site / "METADATA").write_text("Metadata-Version: 2.1\nName: pytorch-ignite\nVersion: 0.4.12\n")
    assert fingerprint(cfg) != before


def test_a_probe_run_judged_by_other_judges_is_another_fingerprint(monkeypatch):
    """A probe run's cell is its judge's: judges of other source make another fingerprint; a plain job has none."""
    from evalkit.controller.job import fingerprint as fingerprint_module

    probe, job = _config(*TINY, "probe=semantics"), _config(*TINY)
    assert fingerprint_module.JUDGES in fingerprint_module.versions(probe)
    assert fingerprint_module.JUDGES not in fingerprint_module.versions(job)
    before, plain = fingerprint(probe), fingerprint(job)
    monkeypatch.setattr(fingerprint_module, "judges_version", lambda: "0123456789ab")
    assert fingerprint(probe) != before and fingerprint(job) == plain


def test_a_run_recorded_before_the_fingerprint_held_versions_is_run_again_naming_what_it_recorded(monkeypatch,
                                                                                                 tmp_path, capsys):
    """Its fingerprint was its config's alone and its versions are its workers' tags: read, compared, said."""
    from importlib import metadata

    from mlflow.tracking import MlflowClient

    from evalkit import names
    from evalkit.controller.job.fingerprint import config_fingerprint
    from evalkit.controller.job.run import reuse_finished

    cfg = _config(*TINY, "trainer=lightning", "sweep.resume=true", f"tracking.uri=sqlite:///{tmp_path / 'm.db'}")
    client = MlflowClient(cfg.tracking.uri)
    exp = client.create_experiment(cfg.tracking.experiment, artifact_location=(tmp_path / "a").as_uri())
    _installed(monkeypatch, lightning="2.6.6")
    old = {names.FINGERPRINT: config_fingerprint(cfg), names.ROLE: names.ROLE_JOB,     # the tags of before
           names.VERSION_PREFIX + "lightning": "2.5.3", names.TORCH_VERSION: metadata.version("torch")}
    run = client.create_run(exp, tags=old).info.run_id
    client.set_terminated(run, "FINISHED")
    assert reuse_finished(cfg, names.ROLE_JOB) is None
    err = capsys.readouterr().err
    assert f"sweep.resume: run {run} was recorded with lightning 2.5.3, now 2.6.6; no evalkit version, now " in err
    assert "torch" not in err
