"""A team's own Dataset taken as tensors (catalog.as_tensors, applied by Task to both splits)."""
from __future__ import annotations

import pytest
import torch
from torch.utils.data import Dataset, TensorDataset

from evalkit.tasks.catalog import Metric, Task, as_tensors


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
