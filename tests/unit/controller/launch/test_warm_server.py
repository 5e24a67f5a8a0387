"""controller/launch/warm_server.py without processes: when a job's workers start fresh, which server a worker is forked
from, and how many servers stay (the servers themselves are tested through the real command:
tests/smoke/test_warm_start.py)."""
from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from evalkit.controller.launch import warm_server


class FakeServer:
    started: list[tuple[str, dict]] = []

    def __init__(self, target: str, env: dict[str, str], modules: tuple[str, ...] = (), python: str = "python"):
        self.target, self.env, self.modules, self.python, self.closed = target, env, modules, python, False
        FakeServer.started.append((target, env))

    @property
    def alive(self) -> bool:
        return not self.closed

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def servers(monkeypatch):
    FakeServer.started = []
    monkeypatch.setattr(warm_server, "WarmServer", FakeServer)
    monkeypatch.setattr(warm_server, "_servers", {})
    return FakeServer.started


ENV = {"PYTHONPATH": "/repo", "OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2", "RANK": "0", "WORLD_SIZE": "1",
       "EVALKIT_SWEEP_POSITION": "1/6"}


def test_one_server_per_adapter_and_environment_whatever_the_rank_threads_and_position(servers):
    first = warm_server.server_for("evalkit.adapters.fabric.FabricAdapter", ENV)
    # rank 1 of a job at world size 2: other rank variables, one thread each, another position in the sweep
    # and MLflow's variables, which the controller sets as it goes and no worker import reads
    other = {**ENV, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "RANK": "1", "WORLD_SIZE": "2",
             "EVALKIT_SWEEP_POSITION": "2/6", "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false"}
    assert warm_server.server_for("evalkit.adapters.fabric.FabricAdapter", other) is first
    # what the imports may read (a path, a wrapper's variable) makes another server; so does another adapter
    assert warm_server.server_for("evalkit.adapters.fabric.FabricAdapter",
                                  {**ENV, "PYTHONPATH": "/elsewhere"}) is not first
    assert warm_server.server_for("evalkit.adapters.baseline.BaselineAdapter", ENV) is not first
    # the wrapper modules it imports (the trainer's `modules`) are the server's too
    lightning = warm_server.server_for("evalkit.adapters.fabric.FabricAdapter", ENV, ("lightning.fabric",))
    assert lightning is not first and lightning.modules == ("lightning.fabric",)
    # another adapter of the same wrapper (a customization's subclass) forks from that server, importing its module
    # in the child; an adapter naming no module does not share
    assert warm_server.server_for("evalkit.adapters.custom.fabric_loss.FabricCustomLoss", ENV,
                                  ("lightning.fabric",)) is lightning
    assert warm_server.server_for("third.party.Adapter", ENV) is not warm_server.server_for(
        "evalkit.adapters.baseline.BaselineAdapter", ENV)
    assert len(servers) == 5


def test_a_wrapper_environment_forks_from_a_server_of_its_own_interpreter(servers):
    """trainer.env: the environment's interpreter imports its wrapper's version; a server of evalkit's interpreter
    would fork workers with evalkit's version, so the interpreter is part of a server's identity."""
    ignite, env_python = ("evalkit.adapters.ignite_engine.IgniteAdapter", ENV, ("ignite.engine",)), "/envs/i/bin/python"
    own = warm_server.server_for(*ignite)
    other = warm_server.server_for(*ignite, env_python)
    assert other is not own and other.python == env_python
    assert warm_server.server_for(*ignite, env_python) is other
    assert warm_server.server_for(*ignite) is own
    assert len(servers) == 2


def test_the_least_recently_used_server_closes_beyond_the_limit(servers, monkeypatch):
    monkeypatch.setattr(warm_server, "MAX_SERVERS", 2)
    a = warm_server.server_for("a.A", ENV)
    b = warm_server.server_for("b.B", ENV)
    assert warm_server.server_for("a.A", ENV) is a          # used again: b is now the least recent
    warm_server.server_for("c.C", ENV)
    assert b.closed and not a.closed
    assert warm_server.server_for("b.B", ENV) is not b      # started again when needed
    assert a.closed                                  # a was the least recent then


def _cfg(**overrides):
    base = {"hardware": {"worker_start": "auto"}, "observe": {"profile": "full", "deprecations": False},
            "distributed": {"nnodes": 1}}
    for key, value in overrides.items():
        section, name = key.split("__")
        base[section][name] = value
    return OmegaConf.create(base)


def test_which_jobs_start_fresh_and_why():
    assert warm_server.refusal(_cfg(), cuda=False) is None
    assert warm_server.refusal(_cfg(hardware__worker_start="fresh"), cuda=False) == "hardware.worker_start=fresh"
    assert warm_server.refusal(_cfg(), cuda=True) == "a CUDA job"
    assert warm_server.refusal(_cfg(observe__profile="timing"), cuda=False) == "a timed job (observe.profile=timing)"
    assert warm_server.refusal(_cfg(observe__deprecations=True, distributed__nnodes=2), cuda=False) == \
        "deprecations recorded (observe.deprecations), several nodes"
    with pytest.raises(warm_server.WarmStartUnavailable, match="hardware.worker_start=warm: a timed job"):
        warm_server.refusal(_cfg(hardware__worker_start="warm", observe__profile="timing"), cuda=False)
