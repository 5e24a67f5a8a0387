"""Checkpoint helpers shared by adapters: atomic writes, safe loads, RNG capture, finding the latest.

A checkpoint written by `atomic_save` has a `<file>.sha256` beside it; `safe_load` refuses a file that no longer
matches it (flipped bytes load silently otherwise: torch's reader checks no checksum). A checkpoint without one
(written elsewhere) is loaded unchecked.
"""
from __future__ import annotations

import contextlib
import errno
import glob
import hashlib
import os
import random
import re
import resource

import numpy as np
import torch


class CorruptCheckpoint(RuntimeError):
    """A checkpoint that exists but cannot be read (the message names the file and what to do)."""


class MissingCheckpoint(FileNotFoundError):
    """No checkpoint where `resume_from` points (the message names the path and what to do)."""


class CheckpointNotWritten(OSError):
    """A checkpoint write failed (a full disk, a file-size limit); its partial file is removed. The message
    names the file, the cause and the fix."""


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
    try:
        torch.save(obj, tmp)
        with open(f"{tmp}{CHECKSUM_SUFFIX}", "w") as fh:
            fh.write(file_digest(tmp) + "\n")
    except (OSError, RuntimeError) as exc:   # torch's writer reports a failed write as a RuntimeError
        for partial in (tmp, f"{tmp}{CHECKSUM_SUFFIX}"):
            with contextlib.suppress(OSError):
                os.remove(partial)
        raise CheckpointNotWritten(write_failure(path, exc)) from exc
    os.replace(f"{tmp}{CHECKSUM_SUFFIX}", f"{path}{CHECKSUM_SUFFIX}")
    os.replace(tmp, path)


def write_failure(path: str, exc: BaseException) -> str:
    """Why a checkpoint write failed, in one line with the fix: a full disk, the process's file-size limit, or
    the error itself."""
    folder = os.path.dirname(os.path.abspath(path))
    errno_ = getattr(exc, "errno", None)
    with contextlib.suppress(OSError):
        stat = os.statvfs(folder)
        if errno_ == errno.ENOSPC or stat.f_bavail * stat.f_frsize < 1 << 20:
            return (f"checkpoint {path} could not be written: the disk holding {folder} is full (no space left on "
                    "device); the partial file was removed: free space there, or checkpoint less often "
                    "(train.ckpt_every) or not at all (train.ckpt_every=0)")
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if errno_ == errno.EFBIG or limit != resource.RLIM_INFINITY:
        shown = "unlimited" if limit == resource.RLIM_INFINITY else f"{limit} bytes"
        return (f"checkpoint {path} could not be written: it is larger than the file-size limit of this process "
                f"({shown}, ulimit -f); the partial file was removed: raise the limit (ulimit -f unlimited) or "
                "checkpoint less often (train.ckpt_every=0: not at all)")
    return (f"checkpoint {path} could not be written ({type(exc).__name__}: {' '.join(str(exc).split())[:200]}); "
            "the partial file was removed: check that folder, or set train.ckpt_every=0 to checkpoint not at all")


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
    if os.path.isfile(path) and not written_by_torch_save(path):
        if not _CHECKPOINT_NAME.search(os.path.basename(path)):    # never a checkpoint: nothing to delete
            raise CorruptCheckpoint(
                f"{path} is not a checkpoint (not a file torch.save writes): point resume_from at a checkpoint an "
                "earlier run wrote (a step_*.pt file, or the checkpoints/ directory of its run: its "
                "evalkit.checkpoint_dir tag)")
        raise CorruptCheckpoint(f"checkpoint {path} cannot be read (not in the format torch.save writes: damaged); "
                                "delete it and resume from an earlier one, or start without resume_from")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - every reader error means the same thing to the user
        raise CorruptCheckpoint(
            f"checkpoint {path} cannot be read ({type(exc).__name__}: {str(exc)[:200]}); "
            f"delete it and resume from an earlier one, or start without resume_from") from exc


def written_by_torch_save(path: str) -> bool:
    """Whether the file begins as torch.save writes: a zip archive (torch >= 1.6), or a pickle (the legacy
    format); anything else (a text file, an image) was never a checkpoint."""
    with open(path, "rb") as fh:
        head = fh.read(4)
    return head.startswith(b"PK\x03\x04") or head[:1] == b"\x80"


_STEP = re.compile(r"step_(\d+)")
_CHECKPOINT_NAME = re.compile(r"(?:step|checkpoint)[_-]?\d+")   # how every adapter names its checkpoints


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
