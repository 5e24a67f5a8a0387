"""The data order every adapter follows, and the fingerprints that recover sample indices from inputs.

Order: epoch e is a permutation of the training set drawn from (seed, e). It is cut into global
batches of `batch_size * world_size` samples (an incomplete last global batch is dropped, so every
rank sees equal micro-batches); rank r takes the r-th slice of `batch_size` samples of each global batch.
"""
from __future__ import annotations

from typing import Iterator

import numpy as np
import torch
from torch.utils.data import Sampler


class OrderedSampler(Sampler[int]):
    """Yields one rank's dataset indices in evalkit's order.

    Each `__iter__` walks one epoch and then advances to the next, so a wrapper that never calls
    `set_epoch` still gets a fresh permutation per epoch; one that does call it gets the epoch it asks for.
    `start_batch` skips the first micro-batches of the first epoch iterated (exact resume).
    """

    def __init__(self, n: int, batch_size: int, seed: int, rank: int = 0, world_size: int = 1,
                 epoch: int = 0, start_batch: int = 0):
        self.n, self.batch_size, self.seed = n, batch_size, seed
        self.rank, self.world_size = rank, world_size
        self.epoch, self.start_batch = epoch, start_batch
        self.batches_per_epoch = n // (batch_size * world_size)
        if self.batches_per_epoch == 0:
            raise ValueError(f"{n} training samples cannot fill one global batch of "
                             f"{batch_size} x {world_size} ranks; lower train.batch_size")

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def epoch_order(self, epoch: int) -> torch.Tensor:
        g = torch.Generator().manual_seed(self.seed * 7919 + epoch)
        return torch.randperm(self.n, generator=g)

    def rank_indices(self, epoch: int) -> torch.Tensor:
        """This rank's indices for `epoch`, micro-batch after micro-batch."""
        global_batch = self.batch_size * self.world_size
        used = self.epoch_order(epoch)[: self.batches_per_epoch * global_batch]
        per_batch = used.view(self.batches_per_epoch, self.world_size, self.batch_size)
        return per_batch[:, self.rank].reshape(-1)

    def __iter__(self) -> Iterator[int]:
        indices = self.rank_indices(self.epoch)[self.start_batch * self.batch_size:]
        self.start_batch = 0
        self.epoch += 1
        return iter(indices.tolist())

    def __len__(self) -> int:
        return (self.batches_per_epoch - self.start_batch) * self.batch_size


class GlobalOrderSampler(Sampler[int]):
    """evalkit's epoch order seen from all ranks: global batch after global batch.

    For wrappers that shard batches themselves (Accelerate's `BatchSamplerShard` gives rank r the
    batches r, r + world_size, ... = the r-th `batch_size` slice of every global batch, i.e. exactly
    `OrderedSampler`'s per-rank order). The epoch comes from `set_epoch` or the constructor.
    """

    def __init__(self, reference: OrderedSampler, epoch: int = 0):
        self.reference, self.epoch = reference, epoch

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        ref = self.reference
        return ref.batches_per_epoch * ref.batch_size * ref.world_size

    def __iter__(self) -> Iterator[int]:
        return iter(self.reference.epoch_order(self.epoch)[: len(self)].tolist())


class ValSampler(Sampler[int]):
    """The validation split in dataset order, sharded by contiguous blocks across ranks."""

    def __init__(self, n: int, rank: int = 0, world_size: int = 1):
        per_rank = -(-n // world_size)
        self.indices = list(range(rank * per_rank, min(n, (rank + 1) * per_rank)))

    def __iter__(self) -> Iterator[int]:
        return iter(self.indices)

    def __len__(self) -> int:
        return len(self.indices)


# ---------------------------------------------------------------- fingerprints
FINGERPRINT_WIDTH = 16


def fingerprint(rows: torch.Tensor) -> list[bytes]:
    """The exact bytes of each row's first values, as stored (one copy, no arithmetic: it runs per micro-batch)."""
    flat = rows.detach().reshape(rows.shape[0], -1)[:, :FINGERPRINT_WIDTH]
    if flat.device.type != "cpu":
        flat = flat.cpu()
    raw = flat.contiguous().view(torch.uint8).numpy()      # (rows, width * itemsize) bytes
    return raw.view(np.dtype((np.void, raw.shape[1]))).ravel().tolist()


class SampleIndex:
    """Maps fingerprints of the task's inputs back to (split, dataset index); -1 when unknown.

    Rows a wrapper converted before the model saw them (Fabric casts float inputs to bf16/fp16 under mixed
    precision) are matched against the task's inputs converted to the same dtype; a fingerprint shared by
    two samples after the conversion makes both unattributable, never guessed.
    """

    def __init__(self, train_inputs: torch.Tensor, val_inputs: torch.Tensor):
        self._heads = {split: inputs.reshape(inputs.shape[0], -1)[:, :FINGERPRINT_WIDTH]
                       for split, inputs in (("train", train_inputs), ("val", val_inputs))}
        self._tables = {(split, head.dtype): self._build(head) for split, head in self._heads.items()}

    @staticmethod
    def _build(inputs: torch.Tensor) -> dict[bytes, int]:
        table: dict[bytes, int] = {}
        for i, key in enumerate(fingerprint(inputs)):
            table[key] = -1 if key in table else i   # a collision makes both rows unattributable
        return table

    def _table(self, split: str, dtype: torch.dtype) -> dict[bytes, int]:
        key = (split, dtype)
        if key not in self._tables:
            self._tables[key] = self._build(self._heads[split].to(dtype))
        return self._tables[key]

    def lookup(self, rows: torch.Tensor, split: str) -> list[int]:
        get = self._table(split, rows.dtype).get
        return [get(k, -1) for k in fingerprint(rows)]
