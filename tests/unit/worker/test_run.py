"""The worker's hand-over of the task's model to the wrapper (issue 29): in the mode `train.model_mode` says; and what
it records of the adapter's report: the typed effective config, whatever the adapter returned."""
from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from evalkit.contract import Deviation, WrapperAdapter
from evalkit.tasks.catalog import mlp_regression
from evalkit.worker.run import effective_config, hand_over


def _modes(model) -> set[bool]:
    return {m.training for m in model.modules()}


def test_the_model_reaches_the_wrapper_in_eval_mode_when_the_run_says_so_as_a_pretrained_one_does():
    task = mlp_regression(0, n_train=8, n_val=4, in_dim=2, hidden=4, depth=2, out_dim=1, noise=0.1, dropout=0.1)
    hand_over(task, OmegaConf.create({"train": {"model_mode": "eval"}}))
    assert _modes(task.model) == {False}
    hand_over(task, OmegaConf.create({"train": {"model_mode": "train"}}))
    assert _modes(task.model) == {True}
    task.model.eval()
    hand_over(task, OmegaConf.create({"train": {}}))            # the default: as built, in train mode
    assert _modes(task.model) == {True}


class _Reporting(WrapperAdapter):
    deviations = (Deviation("batch.partial", "the epoch's last batch is kept"),)

    def fit(self, job) -> None:
        self.record_deviations("batch.partial")
        self.explicit_settings = {"drop_last": False}
        self._effective["loop"] = "its own"


class _Plain:
    def __init__(self, report):
        self.report = report

    def effective_config(self):
        return self.report


def test_the_worker_records_the_typed_effective_config_whatever_the_adapter_returned():
    adapter = _Reporting()
    adapter.fit(None)
    assert effective_config(adapter, window_done=False) == {
        "loop": "its own", "mode": "aligned", "aligns": {}, "explicit_settings": {"drop_last": False},
        "deviations": [{"code": "batch.partial", "text": "the epoch's last batch is kept"}]}
    plain = effective_config(_Plain({"loop": "third party"}), window_done=False)       # a plain dict, typed
    assert plain == {"loop": "third party", "mode": "aligned", "deviations": [], "aligns": {}}
    with pytest.raises(ValueError, match="wrong shape"):
        effective_config(_Plain({"deviations": ["words only"]}), window_done=False)


def test_the_warm_up_gives_every_intra_op_thread_a_chunk_before_the_job_computes_anything(monkeypatch):
    """The first parallel region of a process may compute one thread's chunk of tanh 5e-5 off (torch 2.13 CPU,
    scripts/first_parallel_region.py); the warm-up takes that region, split so that every thread of the job's
    count works in it (ATen gives a thread at least GRAIN_SIZE = 32768 elements)."""
    import torch

    from evalkit.worker import run

    seen = []
    real = torch.tanh
    monkeypatch.setattr(torch, "tanh", lambda t, *a, **k: seen.append(t.numel()) or real(t, *a, **k))
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(3)
        run.warm_up_torch()
    finally:
        torch.set_num_threads(threads)
    assert seen and max(seen) >= 3 * 32768
