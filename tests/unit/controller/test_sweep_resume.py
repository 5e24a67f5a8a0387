"""Sweeps that can be resumed: a job's fingerprint is its resolved config without the tracking settings, and a
sweep re-run with `sweep.resume=true` keeps the FINISHED runs of the same fingerprint, runs FAILED ones again,
lists what it kept on its parent, and the verdict of the new sweep reads the kept runs with its own."""
from __future__ import annotations

from omegaconf import OmegaConf

from evalkit.controller.sweep_resume import fingerprint

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
