"""A task's synthetic data described for the tracking store: per split, its digest, rows, schema and the spec
that regenerates it (the builder, the seed and the builder's arguments: nothing is downloaded)."""
from __future__ import annotations

import hashlib
from typing import Any

import torch
from torch.utils.data import TensorDataset

from evalkit.tasks.catalog import Task

SPLITS = (("train", "training"), ("val", "evaluation"))   # (split, MLflow's dataset context)
FIELDS = ("x", "y")


def digest(data: TensorDataset) -> str:
    """The first 16 hex digits of a SHA-256 over every tensor's dtype, shape and bytes: equal data, equal digest."""
    h = hashlib.sha256()
    for tensor in data.tensors:
        t = tensor.detach().cpu().contiguous()
        h.update(f"{t.dtype}{tuple(t.shape)}".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()[:16]


def describe(task: Task, builder: str, seed: int, arguments: dict[str, Any]) -> list[dict[str, Any]]:
    """One entry per split: name, context, digest, rows, schema (each tensor's dtype and per-row shape) and the
    source spec (builder, seed, arguments)."""
    out = []
    for split, context in SPLITS:
        data: TensorDataset = getattr(task, f"{split}_set")
        schema = {name: {"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape[1:])}
                  for name, t in zip(FIELDS, data.tensors)}
        out.append({"name": f"{task.name}-{split}", "context": context, "digest": digest(data),
                    "rows": len(data), "schema": schema,
                    "source": {"builder": builder, "seed": seed, "split": split, "arguments": arguments}})
    return out
