"""The worker's hand-over of the task's model to the wrapper (issue 29): in the mode `train.model_mode` says."""
from __future__ import annotations

from omegaconf import OmegaConf

from evalkit.tasks.catalog import mlp_regression
from evalkit.worker.run import hand_over


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
