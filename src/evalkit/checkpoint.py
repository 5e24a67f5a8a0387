"""Checkpoint helpers shared by adapters: atomic writes, safe loads, RNG capture, finding the latest.

A checkpoint written by `atomic_save` has a `<file>.sha256` beside it; `safe_load` refuses a file that no longer
matches it (flipped bytes load silently otherwise: torch's reader checks no checksum). A checkpoint without one
(written elsewhere) is loaded unchecked.
"""
from __future__ import annotations

import glob
import hashlib
import os
import random
import re

import numpy as np
import torch


class CorruptCheckpoint(RuntimeError):
    """A checkpoint that exists but cannot be read (the message names the file and what to do)."""


class MissingCheckpoint(FileNotFoundError):
    """No checkpoint where `resume_from` points (the message names the path and what to do)."""


CHECKSUM_SUFFIX = ".sha256"


def file_digest(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def atomic_save(obj, path: str) -> None:
    """Write to a temporary file and rename, so a kill mid-write never leaves a truncated checkpoint; its checksum
    is renamed into place first (a kill between the two renames leaves a checksum without its file, never the
    reverse)."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = f"{path}.tmp-{os.getpid()}"
    torch.save(obj, tmp)
    with open(f"{tmp}{CHECKSUM_SUFFIX}", "w") as fh:
        fh.write(file_digest(tmp) + "\n")
    os.replace(f"{tmp}{CHECKSUM_SUFFIX}", f"{path}{CHECKSUM_SUFFIX}")
    os.replace(tmp, path)


def safe_load(path: str) -> dict:
    """torch.load with weights_only=True; any failure becomes one clear CorruptCheckpoint."""
    if not os.path.exists(path):
        raise MissingCheckpoint(f"checkpoint {path} does not exist; check resume_from")
    checksum = f"{path}{CHECKSUM_SUFFIX}"
    if os.path.exists(checksum):
        with open(checksum) as fh:
            expected = fh.read().strip()
        if file_digest(path) != expected:
            raise CorruptCheckpoint(f"checkpoint {path} does not match its checksum {checksum} (changed or damaged "
                                    "after it was written); delete it and resume from an earlier one, or start "
                                    "without resume_from")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - every reader error means the same thing to the user
        raise CorruptCheckpoint(
            f"checkpoint {path} cannot be read ({type(exc).__name__}: {str(exc)[:200]}); "
            f"delete it and resume from an earlier one, or start without resume_from") from exc


_STEP = re.compile(r"step_(\d+)")


def latest_checkpoint(path: str, pattern: str = "step_*.pt") -> str:
    """`path` itself when it is a file; else the highest-step checkpoint inside the directory."""
    if os.path.isfile(path):
        return path
    candidates = [p for p in glob.glob(os.path.join(path, pattern)) if _STEP.search(os.path.basename(p))]
    if not candidates:
        raise MissingCheckpoint(f"no checkpoint matching {pattern} in {path}; check resume_from")
    return max(candidates, key=lambda p: int(_STEP.search(os.path.basename(p)).group(1)))


def capture_rng() -> dict:
    state = {
        "torch": torch.get_rng_state(),
        "python": list(random.getstate()[1]) + [random.getstate()[2] or 0],
        "numpy": torch.from_numpy(np.random.get_state()[1].astype(np.int64)),
        "numpy_pos": np.random.get_state()[2],
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def restore_rng(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    py = state["python"]
    random.setstate((3, tuple(py[:-1]), None))
    np.random.set_state(("MT19937", state["numpy"].numpy().astype(np.uint32), int(state["numpy_pos"]), 0, 0.0))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])
