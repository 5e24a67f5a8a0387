"""torchvision's ResNet-18 as a bundled task, built offline from code on generated images (`task=resnet18`).

The network (BasicBlock, stages of 2, 2, 2, 2 blocks, BatchNorm after every convolution) is written out in torch.nn:
torchvision's own `resnet18` is not imported, since PyPI's torchvision wheels are built against one torch release
each and fail to import beside another ("operator torchvision::nms does not exist" beside torch 2.13.0), so depending
on it would pin the torch a team evaluates. The layer structure, initialisation and forward are torchvision's
(torchvision/models/resnet.py, 0.2x); `width` scales every stage (torchvision: 64), so the same network fits a CPU
test.
"""
from __future__ import annotations

import torch
from torch import nn

from evalkit.tasks.catalog import Metric, Task, _accuracy_stats, pattern_images


class BasicBlock(nn.Module):
    """torchvision's BasicBlock: two 3x3 convolutions with BatchNorm, a projected shortcut where the shape changes."""

    def __init__(self, inplanes: int, planes: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class ResNet18(nn.Module):
    """torchvision.models.resnet18's network with every stage's width scaled by `width / 64`."""

    def __init__(self, channels: int, classes: int, width: int = 64):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, width, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        stages, inplanes = [], width
        for i, planes in enumerate((width, 2 * width, 4 * width, 8 * width)):
            stride = 1 if i == 0 else 2
            stages.append(nn.Sequential(BasicBlock(inplanes, planes, stride), BasicBlock(planes, planes)))
            inplanes = planes
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8 * width, classes)
        for m in self.modules():    # torchvision's initialisation (zero_init_residual=False)
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet18(seed: int, *, n_train: int, n_val: int, image_size: int, channels: int, width: int, classes: int,
             noise: float) -> Task:
    """`catalog.pattern_images` classified by a ResNet-18 (`width`: the first stage's channels, torchvision's 64). The
    model carries BatchNorm running statistics (buffers a checkpoint must hold) and 20 BatchNorm layers whose train
    and eval modes differ. Metric: accuracy (higher is better)."""
    train, val = pattern_images(seed, n_train, n_val, image_size, channels, classes, noise)
    torch.manual_seed(seed)
    model = ResNet18(channels, classes, width)
    return Task("resnet18", model, train, val, nn.CrossEntropyLoss(),
                Metric("accuracy", True, _accuracy_stats, scale="absolute"))
