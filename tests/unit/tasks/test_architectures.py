"""The bundled real architectures (evalkit.tasks.architectures): torchvision's ResNet-18 and a GPT-2 from its config,
built offline from a seed; and a team's own Dataset taken as tensors (catalog.as_tensors)."""
from __future__ import annotations

import pytest
import torch
from torch.utils.data import Dataset, TensorDataset

from evalkit.tasks.architectures import ResNet18, hf_causal_lm, resnet18
from evalkit.tasks.catalog import IGNORE_INDEX, Metric, Task, as_tensors

RESNET = dict(n_train=16, n_val=8, image_size=32, channels=3, width=4, classes=10, noise=1.0)
GPT2 = dict(n_train=16, n_val=8, vocab_size=16, seq_len=12, hidden=16, depth=1, n_heads=2)


def test_resnet18_at_torchvisions_width_has_torchvisions_parameter_count():
    # torchvision.models.resnet18(num_classes=10): 11,181,642 parameters, 20 BatchNorm layers (40 running stats)
    model = ResNet18(3, 10, 64)
    assert sum(p.numel() for p in model.parameters()) == 11_181_642
    assert sum(isinstance(m, torch.nn.BatchNorm2d) for m in model.modules()) == 20


def test_resnet18_is_the_same_from_the_same_seed_and_carries_buffers():
    a, b = resnet18(3, **RESNET), resnet18(3, **RESNET)
    assert all(torch.equal(x, y) for x, y in zip(a.model.state_dict().values(), b.model.state_dict().values()))
    assert torch.equal(a.train_set.tensors[0], b.train_set.tensors[0])
    assert not torch.equal(a.model.conv1.weight, resnet18(4, **RESNET).model.conv1.weight)
    assert any("running_mean" in name for name, _ in a.model.named_buffers())
    assert a.model(a.train_set.tensors[0][:4]).shape == (4, 10)


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


class Pairs(Dataset):
    def __len__(self):
        return 3

    def __getitem__(self, i):
        return torch.full((2,), float(i)), torch.tensor(i)


def test_a_map_style_dataset_of_pairs_becomes_tensors_in_index_order():
    data = as_tensors(Pairs(), "train_set")
    assert isinstance(data, TensorDataset)
    assert data.tensors[0].tolist() == [[0, 0], [1, 1], [2, 2]] and data.tensors[1].tolist() == [0, 1, 2]
    kept = TensorDataset(torch.zeros(2))
    assert as_tensors(kept, "val_set") is kept


def test_a_dataset_that_is_not_pairs_of_tensors_is_named_with_the_fix():
    class Words(Pairs):
        def __getitem__(self, i):
            return "word", i

    metric = Metric("accuracy", True, lambda out, y: (0.0, 1))
    with pytest.raises(TypeError, match=r"the task's train_set \(Words\) is not a map-style Dataset of \(input, "
                                        r"target\) tensor pairs .*docs/tasks.md"):
        Task("t", torch.nn.Linear(1, 1), Words(), Pairs(), torch.nn.MSELoss(), metric)
