"""The Lightning adapter's defaults flags (issue 29): the quick start's Trainer(...) with the run's settings
translated, and a clip value only when the run asks for one (the wrapper's default otherwise)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

pytest.importorskip("lightning")

from evalkit.adapters.lightning_trainer import LightningAdapter  # noqa: E402

# the Trainer flags defaults mode may pass: each a translation of a run setting (tests/smoke/test_quick_start_lightning)
TRANSLATED = {"accelerator", "devices", "num_nodes", "precision", "max_steps", "accumulate_grad_batches",
              "gradient_clip_val", "val_check_interval", "check_val_every_n_epoch", "callbacks", "default_root_dir"}


def test_a_clip_value_goes_to_the_trainer_only_when_the_run_asks_for_one(tmp_path):
    adapter = LightningAdapter(mode="defaults")
    job = SimpleNamespace(device=SimpleNamespace(type="cpu"), world_size=1, nnodes=1, ranks_per_node=1, max_steps=4,
                          grad_accum=2, val_every=0, ckpt_every=0, ckpt_dir=str(tmp_path / "ckpt"), grad_clip=None)
    flags = adapter._defaults_flags(job, "32-true")
    assert "gradient_clip_val" not in flags and "val_check_interval" not in flags
    assert "check_val_every_n_epoch" not in flags
    flags = adapter._defaults_flags(SimpleNamespace(**{**vars(job), "grad_clip": 0.5}), "32-true")
    assert flags["gradient_clip_val"] == 0.5 and "gradient_clip_algorithm" not in flags
    assert set(flags) <= TRANSLATED and "num_nodes" not in flags


def test_ranks_on_several_nodes_are_devices_per_node_times_num_nodes(tmp_path):
    """Lightning counts `devices` per node: `devices=world_size` on two nodes made node 1's first rank global rank
    2 of 2 (gloo: "rank < size. 2 vs 2", under srun on the test cluster)."""
    job = SimpleNamespace(device=SimpleNamespace(type="cpu"), world_size=4, nnodes=2, ranks_per_node=2, max_steps=4,
                          grad_accum=1, val_every=0, ckpt_every=0, ckpt_dir=str(tmp_path / "ckpt"), grad_clip=None)
    flags = LightningAdapter(mode="defaults")._defaults_flags(job, "32-true")
    assert (flags["devices"], flags["num_nodes"]) == (2, 2)


def test_a_token_task_under_accumulation_or_ddp_reports_the_mean_of_micro_batch_means_it_cannot_align():
    """Automatic optimization divides each loss by accumulate_grad_batches: on a token task (issue 33) that is a
    mean of micro-batch means, declared with the setting that could align it; a fixed-terms task declares nothing."""
    adapter = LightningAdapter(mode="aligned")
    sampler = SimpleNamespace(batches_per_epoch=12)

    def job(loss_terms, grad_accum=3, world_size=1):
        return SimpleNamespace(task=SimpleNamespace(loss_terms=loss_terms), grad_accum=grad_accum,
                               world_size=world_size, train_sampler=lambda: sampler)

    def count(y):
        return int(y.numel())

    assert "loss_norm" in adapter._deviations(job(count), None)
    assert "loss_norm" in adapter._deviations(job(count, grad_accum=1, world_size=2), None)
    assert "loss_norm" not in adapter._deviations(job(count, grad_accum=1), None)
    assert "loss_norm" not in adapter._deviations(job(None), None)
    assert "manual optimization" in LightningAdapter.aligns["loss_norm"]
