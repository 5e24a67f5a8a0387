"""Real architectures as bundled tasks, built offline from code: no weights or data are ever downloaded.

`resnet18`: torchvision's ResNet-18 (BasicBlock, stages of 2, 2, 2, 2 blocks, BatchNorm after every convolution)
written out in torch.nn, on generated images. torchvision's own `resnet18` is not imported: PyPI's torchvision
wheels are built against one torch release each and fail to import beside another ("operator torchvision::nms does
not exist" beside torch 2.13.0), so depending on it would pin the torch a team evaluates. The layer structure,
initialisation and forward are torchvision's (torchvision/models/resnet.py, 0.2x); `width` scales every stage
(torchvision: 64), so the same network fits a CPU test.

`hf_causal_lm`: a Hugging Face GPT-2 built from a `GPT2Config` (never `from_pretrained`), with its input and output
embeddings tied, fed an attention mask that hides the right padding, on tiny_lm's token sequences. It needs the
`hf_trainer` extra (transformers).
"""
from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import TensorDataset

from evalkit.tasks.catalog import (
    PAD_TOKEN,
    Metric,
    Task,
    TokenLoss,
    _accuracy_stats,
    _generator,
    count_tokens,
    markov_tokens,
    perplexity,
)


# ---------------------------------------------------------------- resnet18
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
    """Gaussian-noise images plus one fixed random pattern per class, classified by a ResNet-18 (`width`: the first
    stage's channels, torchvision's 64). The model carries BatchNorm running statistics (buffers a checkpoint must
    hold) and 20 BatchNorm layers whose train and eval modes differ. Metric: accuracy (higher is better)."""
    g = _generator(seed, 1)
    shape = (channels, image_size, image_size)
    patterns = torch.randn(classes, *shape, generator=g)

    def split(n: int, stream: int) -> TensorDataset:
        gs = _generator(seed, stream)
        y = torch.randint(classes, (n,), generator=gs)
        return TensorDataset(0.5 * patterns[y] + noise * torch.randn(n, *shape, generator=gs), y)

    torch.manual_seed(seed)
    model = ResNet18(channels, classes, width)
    return Task("resnet18", model, split(n_train, 2), split(n_val, 3), nn.CrossEntropyLoss(),
                Metric("accuracy", True, _accuracy_stats, scale="absolute"))


# ---------------------------------------------------------------- hf_causal_lm
class CausalLM(nn.Module):
    """A Hugging Face causal LM seen through evalkit's task contract: token ids in, logits out. The attention mask
    hides the pad tokens (PAD_TOKEN) from attention; `lm` is the transformers model itself (its `config`,
    `save_pretrained`, tied embeddings)."""

    def __init__(self, lm: nn.Module):
        super().__init__()
        self.lm = lm

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.lm(input_ids=tokens, attention_mask=(tokens != PAD_TOKEN).long()).logits


def _transformers():
    try:
        import transformers
    except ImportError as exc:
        raise ImportError("task=hf_causal_lm builds a transformers model, and transformers is not installed: "
                          "pip install 'evalkit[hf_trainer]' (or choose another task)") from exc
    return transformers


def hf_causal_lm(seed: int, *, n_train: int, n_val: int, vocab_size: int, seq_len: int, hidden: int, depth: int,
                 n_heads: int) -> Task:
    """A GPT-2 (`transformers.GPT2LMHeadModel`) built from a `GPT2Config` (`hidden`: n_embd, `depth`: n_layer,
    `n_heads`: n_head; dropout off, so a step depends on its data only; input and output embeddings tied) on tiny_lm's
    token sequences: the loss is the token mean over a micro-batch's non-pad targets (`Task.loss_terms`). Metric:
    perplexity over non-pad tokens (lower is better)."""
    transformers = _transformers()
    train, val = markov_tokens(seed, n_train, n_val, vocab_size, seq_len)
    config = transformers.GPT2Config(vocab_size=vocab_size, n_positions=seq_len, n_embd=hidden, n_layer=depth,
                                     n_head=n_heads, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                                     tie_word_embeddings=True, bos_token_id=PAD_TOKEN, eos_token_id=PAD_TOKEN,
                                     pad_token_id=PAD_TOKEN)
    torch.manual_seed(seed)
    model = CausalLM(transformers.GPT2LMHeadModel(config))
    return Task("hf_causal_lm", model, train, val, TokenLoss(), perplexity(), loss_terms=count_tokens)
