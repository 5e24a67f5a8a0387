"""Tasks: model + synthetic data + loss + validation metric, built from a seed, identical for every adapter.

Nothing is ever downloaded: every tensor comes from a `torch.Generator` seeded from the run's seed.
The model's initial weights depend only on the seed (`torch.manual_seed(seed)` right before it is built).
A builder takes the seed and its own keyword arguments, which are the fields of its task's schema
(`evalkit.tasks.schemas`) and of its YAML in `conf/task/`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn
from torch.utils.data import Dataset, TensorDataset

from evalkit.tasks.finalizers import FINALIZERS

IGNORE_INDEX = -100
PAD_TOKEN = 0


@dataclass(frozen=True)
class Metric:
    """A validation metric aggregated as sum/count over batches, then finalised."""

    name: str
    higher_is_better: bool
    batch_stats: Callable[[torch.Tensor, torch.Tensor], tuple[float, int]]  # (output, target) -> (sum, count)
    finalize: str = "identity"       # a FINALIZERS name, applied to sum/count (named so records can carry it)
    scale: str = "relative"          # how the verdict compares it: "relative" (ratio; positive metrics) or
                                     # "absolute" (difference in the metric's units; metrics that can be <= 0)

    def value(self, total: float, count: int) -> float:
        return FINALIZERS[self.finalize](total / count)


@dataclass
class Task:
    name: str
    model: nn.Module
    train_set: TensorDataset
    val_set: TensorDataset
    loss_fn: nn.Module   # evalkit's instance: observers hook it; adapters must call it for the training loss
    metric: Metric
    # The number of loss terms in a batch's targets, where it varies from batch to batch (tiny_lm: the targets that
    # are not IGNORE_INDEX, so loss_fn is a mean over a count that differs between micro-batches and a window's loss
    # is its token mean: the sum of its token losses over its token count, not the mean of its micro-batch means).
    # None: a fixed number of terms per sample, where the two are equal (dividing by the window's size).
    loss_terms: Callable[[torch.Tensor], int] | None = None

    def __post_init__(self) -> None:
        self.train_set, self.val_set = as_tensors(self.train_set, "train_set"), as_tensors(self.val_set, "val_set")


def as_tensors(data: Dataset, which: str) -> TensorDataset:
    """A map-style Dataset of `(x, y)` tensor pairs as one TensorDataset (its samples stacked once, in index order):
    evalkit's observers find a sample by its index (sample ids, validation targets, the semantic oracle), and the
    records describe each split by its tensors. A TensorDataset is kept as it is."""
    if isinstance(data, TensorDataset):
        return data
    try:
        xs, ys = zip(*(data[i] for i in range(len(data))))
        return TensorDataset(torch.stack([torch.as_tensor(x) for x in xs]),
                             torch.stack([torch.as_tensor(y) for y in ys]))
    except Exception as exc:  # noqa: BLE001 - any failure means the same fix
        raise TypeError(f"the task's {which} ({type(data).__name__}) is not a map-style Dataset of (input, target) "
                        f"tensor pairs of one shape each ({type(exc).__name__}: {exc}): return a TensorDataset, or a "
                        "Dataset whose __getitem__(i) returns (x, y) tensors (docs/tasks.md)") from exc


def _generator(seed: int, stream: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed * 1_000_003 + stream)


# ---------------------------------------------------------------- mlp_regression
def _mse_stats(out: torch.Tensor, y: torch.Tensor) -> tuple[float, int]:
    return float(((out.float() - y) ** 2).sum()), y.numel()


def mlp_regression(seed: int, *, n_train: int, n_val: int, in_dim: int, hidden: int, depth: int, out_dim: int,
                   noise: float, dropout: float = 0.0, batchnorm: bool = False) -> Task:
    """y = tanh(x W1) w2 + noise; an MLP of `depth` hidden layers learns it. Metric: MSE (lower is better).
    `dropout` > 0 adds a dropout layer after each hidden layer: the training then draws on torch's RNG.
    `batchnorm` adds a BatchNorm1d after each hidden linear layer: the model then carries buffers (running
    statistics, used in eval mode) that a checkpoint must hold besides the parameters."""
    g = _generator(seed, 1)
    w1 = torch.randn(in_dim, hidden, generator=g) / math.sqrt(in_dim)
    w2 = torch.randn(hidden, out_dim, generator=g) / math.sqrt(hidden)

    def split(n: int, stream: int) -> TensorDataset:
        gs = _generator(seed, stream)
        x = torch.randn(n, in_dim, generator=gs)
        y = torch.tanh(x @ w1) @ w2 + noise * torch.randn(n, out_dim, generator=gs)
        return TensorDataset(x, y)

    torch.manual_seed(seed)
    layers: list[nn.Module] = []
    width = in_dim
    for _ in range(depth):
        layers += [nn.Linear(width, hidden), *([nn.BatchNorm1d(hidden)] if batchnorm else []), nn.GELU(),
                   *([nn.Dropout(dropout)] if dropout else [])]
        width = hidden
    layers.append(nn.Linear(width, out_dim))
    return Task("mlp_regression", MLP(*layers), split(n_train, 2), split(n_val, 3),
                nn.MSELoss(), Metric("mse", False, _mse_stats, scale="relative"))


class MLP(nn.Sequential):
    """mlp_regression's model: its layers in order, as a class of its own, as a user's model is one. torch.compile
    traces a bare `torch.nn` container's hooks into its graph (evalkit's would break it), a user class's it runs as
    Python around the compiled forward."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x)


# ---------------------------------------------------------------- cnn_classification
def _accuracy_stats(out: torch.Tensor, y: torch.Tensor) -> tuple[float, int]:
    return float((out.argmax(-1) == y).sum()), y.numel()


class SmallCNN(nn.Module):
    def __init__(self, channels: int, width: int, classes: int):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(channels, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 3, padding=1), nn.BatchNorm2d(2 * width), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(2 * width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).flatten(1))


def pattern_images(seed: int, n_train: int, n_val: int, image_size: int, channels: int, classes: int,
                   noise: float) -> tuple[TensorDataset, TensorDataset]:
    """Train and validation images: Gaussian noise plus one fixed random pattern per class, labelled with the class
    (cnn_classification's data, and resnet18's)."""
    g = _generator(seed, 1)
    shape = (channels, image_size, image_size)
    patterns = torch.randn(classes, *shape, generator=g)

    def split(n: int, stream: int) -> TensorDataset:
        gs = _generator(seed, stream)
        y = torch.randint(classes, (n,), generator=gs)
        x = 0.5 * patterns[y] + noise * torch.randn(n, *shape, generator=gs)
        return TensorDataset(x, y)

    return split(n_train, 2), split(n_val, 3)


def cnn_classification(seed: int, *, n_train: int, n_val: int, image_size: int, channels: int, hidden: int,
                       out_dim: int, noise: float) -> Task:
    """`pattern_images` (`out_dim` classes; `hidden`: the first convolution's width). Metric: accuracy (higher is
    better)."""
    train, val = pattern_images(seed, n_train, n_val, image_size, channels, out_dim, noise)
    torch.manual_seed(seed)
    model = SmallCNN(channels, hidden, out_dim)
    return Task("cnn_classification", model, train, val,
                nn.CrossEntropyLoss(), Metric("accuracy", True, _accuracy_stats, scale="absolute"))


# ---------------------------------------------------------------- tiny_lm
class TokenLoss(nn.Module):
    """Cross-entropy averaged over the micro-batch's non-pad tokens (targets equal to IGNORE_INDEX are skipped), in
    float32 at least (a float64 model, the semantic probe's oracle, keeps float64)."""

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits = logits.to(torch.promote_types(logits.dtype, torch.float32))
        return nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE_INDEX)


def count_tokens(targets: torch.Tensor) -> int:
    """The loss terms of a token batch: its targets that are not IGNORE_INDEX."""
    return int((targets != IGNORE_INDEX).sum())


def _nll_stats(out: torch.Tensor, y: torch.Tensor) -> tuple[float, int]:
    nll = nn.functional.cross_entropy(out.flatten(0, 1).float(), y.flatten(),
                                      ignore_index=IGNORE_INDEX, reduction="sum")
    return float(nll), int((y != IGNORE_INDEX).sum())


class TinyDecoder(nn.Module):
    """A causal transformer decoder (self-attention only). Pad tokens sit at the end of each row, so
    the causal mask alone keeps real tokens from attending to them."""

    def __init__(self, vocab: int, seq_len: int, width: int, depth: int, heads: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.pos = nn.Parameter(torch.randn(seq_len, width) * 0.02)
        layer = nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.0, batch_first=True,
                                           norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab)
        self.register_buffer("causal", nn.Transformer.generate_square_subsequent_mask(seq_len), persistent=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        n = tokens.shape[1]
        h = self.embed(tokens) + self.pos[:n]
        h = self.blocks(h, mask=self.causal[:n, :n], is_causal=True)
        return self.head(self.norm(h))


def markov_tokens(seed: int, n_train: int, n_val: int, vocab_size: int, seq_len: int
                  ) -> tuple[TensorDataset, TensorDataset]:
    """Train and validation token sequences from a random first-order Markov chain, lengths uniform in
    [seq_len/4, seq_len], right-padded with PAD_TOKEN, whose pad targets are IGNORE_INDEX (tiny_lm's data, and
    hf_causal_lm's)."""
    g = _generator(seed, 1)
    logits = torch.randn(vocab_size, vocab_size, generator=g) * 3.0
    logits[:, PAD_TOKEN] = -float("inf")
    transition = torch.softmax(logits, dim=-1)

    def split(n: int, stream: int) -> TensorDataset:
        gs = _generator(seed, stream)
        rows = torch.full((n, seq_len + 1), PAD_TOKEN, dtype=torch.long)
        lengths = torch.randint(seq_len // 4, seq_len + 2, (n,), generator=gs)
        rows[:, 0] = torch.randint(1, vocab_size, (n,), generator=gs)
        for t in range(1, seq_len + 1):
            rows[:, t] = torch.multinomial(transition[rows[:, t - 1].clamp(min=1)], 1, generator=gs).squeeze(1)
        rows[torch.arange(seq_len + 1) >= lengths[:, None]] = PAD_TOKEN
        x, y = rows[:, :-1].clone(), rows[:, 1:].clone()
        y[y == PAD_TOKEN] = IGNORE_INDEX
        return TensorDataset(x, y)

    return split(n_train, 2), split(n_val, 3)


def perplexity() -> Metric:
    """Perplexity over the non-pad target tokens (lower is better)."""
    return Metric("perplexity", False, _nll_stats, finalize="exp", scale="relative")


def tiny_lm(seed: int, *, n_train: int, n_val: int, vocab_size: int, seq_len: int, hidden: int, depth: int,
            n_heads: int) -> Task:
    """Token sequences from `markov_tokens`: micro-batches hold different numbers of target tokens
    (`Task.loss_terms`), and the loss is the token mean over a micro-batch's non-pad targets. Metric: perplexity over
    non-pad tokens (lower is better)."""
    train, val = markov_tokens(seed, n_train, n_val, vocab_size, seq_len)
    torch.manual_seed(seed)
    model = TinyDecoder(vocab_size, seq_len, hidden, depth, n_heads)
    return Task("tiny_lm", model, train, val, TokenLoss(), perplexity(), loss_terms=count_tokens)
