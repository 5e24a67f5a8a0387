"""task=resnet18 (evalkit.tasks.resnet): torchvision's ResNet-18 written out in torch.nn, built offline from a seed."""
from __future__ import annotations

import torch

from evalkit.tasks.resnet import ResNet18, resnet18

RESNET = dict(n_train=16, n_val=8, image_size=32, channels=3, width=4, classes=10, noise=1.0)


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
