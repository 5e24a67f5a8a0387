"""task=hf_causal_lm (evalkit.tasks.hf_causal_lm): a GPT-2 built from its config, embeddings tied, padding masked."""
from __future__ import annotations

import torch

from evalkit.tasks.catalog import IGNORE_INDEX
from evalkit.tasks.hf_causal_lm import hf_causal_lm

GPT2 = dict(n_train=16, n_val=8, vocab_size=16, seq_len=12, hidden=16, depth=1, n_heads=2)


def test_hf_causal_lm_ties_its_embeddings_and_masks_the_padding():
    task = hf_causal_lm(0, **GPT2)
    lm = task.model.lm
    assert lm.lm_head.weight is lm.transformer.wte.weight           # one parameter under two names
    assert len(list(task.model.parameters())) == len(dict(task.model.named_parameters()))
    x, y = task.train_set.tensors
    row = int((y[:, -1] == IGNORE_INDEX).nonzero()[0])              # a padded row
    real = int((y[row] != IGNORE_INDEX).sum())
    other = x[row:row + 1].clone()
    other[0, real + 1:] = 5                                          # other tokens where the padding was
    with torch.no_grad():
        assert torch.allclose(task.model(x[row:row + 1])[0, :real], task.model(other)[0, :real], atol=1e-6)
    assert task.loss_terms(y[:2]) == int((y[:2] != IGNORE_INDEX).sum())
