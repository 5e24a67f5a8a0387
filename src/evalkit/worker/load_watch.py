"""Which `torch.load` calls a resumed job made, and whether each allowed arbitrary pickled code.

`weights_only=False` unpickles whatever the file holds (code included); torch's own default since 2.6 is True.
The stability probe reports which wrappers load their checkpoints with it off: evalkit never asks for that itself
(`evalkit.contract.checkpoint.safe_load` loads with `weights_only=True`). Watching wraps the public `torch.load` only.
"""
from __future__ import annotations

import os

import torch


class LoadWatch:
    def __init__(self):
        self.calls: list[dict] = []
        self._original = torch.load
        torch.load = self._load

    def _load(self, f, *args, **kwargs):
        weights_only = kwargs.get("weights_only", args[2] if len(args) > 2 else None)
        path = f if isinstance(f, (str, os.PathLike)) else getattr(f, "path", None) or getattr(f, "name", None)
        name = os.path.basename(os.fspath(path)) if isinstance(path, (str, os.PathLike)) else type(f).__name__
        self.calls.append({"file": name, "weights_only": weights_only})
        return self._original(f, *args, **kwargs)

    def remove(self) -> None:
        torch.load = self._original

    def summary(self) -> dict:
        unsafe = [c["file"] for c in self.calls if c["weights_only"] is False]
        return {"checkpoint_loads": self.calls, "unsafe_loads": unsafe}
