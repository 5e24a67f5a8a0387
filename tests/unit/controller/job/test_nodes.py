"""One job over two nodes (issue 15): two `evalkit` controllers on 127.0.0.1, node_rank 0 and 1, one rank each,
meeting in a shared directory, record exactly what one controller with both ranks records; node 1 records nothing
in MLflow, a failure of its rank fails node 0's run with its cause, and a misconfigured multi-node job is one
clear error before anything is recorded."""
from __future__ import annotations

import pytest
from hydra import compose, initialize_config_module

from evalkit.config import register_configs, validate

register_configs()


# ------------------------------------------------------------------ misconfigurations
def problems(*overrides: str) -> list[str]:
    with initialize_config_module("evalkit.conf", version_base=None):
        return validate(compose("config", overrides=list(overrides)))


MULTI = ["distributed=ddp", "distributed.nnodes=2", "distributed.shared_dir=/shared/job"]


@pytest.mark.parametrize("overrides,message", [
    (["distributed.world_size=2"], "distributed.master_port=null with distributed.nnodes=2: every node must reach "
                                   "rank 0 at the same port"),
    (["distributed.world_size=3", "distributed.master_port=29500"],
     "distributed.world_size=3 is not divisible by distributed.nnodes=2: the job's ranks are split evenly over its "
     "nodes; set distributed.world_size to a multiple of 2 (e.g. distributed.world_size=4)"),
    (["distributed.world_size=2", "distributed.master_port=29500", "distributed.node_rank=2"],
     "distributed.node_rank=2 is not a node of distributed.nnodes=2 (allowed: 0 to 1)"),
    (["distributed.world_size=2", "distributed.master_port=29500", "distributed.shared_dir=null"],
     "distributed.shared_dir=null with distributed.nnodes=2: the nodes meet in a folder every node sees"),
    (["distributed.world_size=2", "distributed.master_port=29500", "probe=semantics"],
     "probe=semantics with distributed.nnodes=2: a probe runs its jobs on one node; set distributed.nnodes=1"),
    (["distributed.world_size=2", "distributed.master_port=70000"],
     "distributed.master_port=70000 is out of range (allowed: null or in [1, 65535])"),
])
def test_each_multinode_misconfiguration_is_one_message_with_the_fix(overrides, message):
    (found,) = problems(*MULTI, *overrides)
    assert found.startswith(message), found


def test_a_valid_multinode_config_and_a_fixed_port_on_one_node_pass():
    assert problems(*MULTI, "distributed.world_size=4", "distributed.master_port=29500",
                    "distributed.node_rank=1") == []
    assert problems("distributed=ddp", "distributed.master_port=29500") == []
