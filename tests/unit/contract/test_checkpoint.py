"""Checkpoint writes and reads fail in one line naming the file, the cause and the fix (issue 48): a write that
fails for lack of space or for the file-size limit removes its partial file; a file that was never a checkpoint is
not called corrupt (nor its deletion advised)."""
from __future__ import annotations

import os
import resource
from collections import namedtuple

import pytest
import torch

from evalkit.contract import checkpoint
from evalkit.contract.checkpoint import CheckpointNotWritten, CorruptCheckpoint, atomic_save, safe_load

BIG = {"w": torch.zeros(1 << 20)}      # 4 MiB


def test_a_write_past_the_file_size_limit_is_named_and_leaves_no_partial_file(tmp_path):
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, hard))
    try:
        with pytest.raises(CheckpointNotWritten) as caught:
            atomic_save(BIG, str(tmp_path / "step_00000005.pt"))
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    message = str(caught.value)
    assert message.startswith(f"checkpoint {tmp_path / 'step_00000005.pt'} could not be written: it is larger than "
                              "the file-size limit of this process (1048576 bytes, ulimit -f)")
    assert "the partial file was removed" in message and "\n" not in message
    assert os.listdir(tmp_path) == []


def test_a_write_on_a_full_disk_is_named_and_leaves_no_partial_file(tmp_path, monkeypatch):
    def half_then_fail(obj, path):
        with open(path, "wb") as fh:
            fh.write(b"PK\x03\x04" + b"\0" * 1000)
        raise RuntimeError("[enforce fail at inline_container.cc:664] . PytorchStreamWriter failed writing file "
                           "data/0: file write failed")

    Stat = namedtuple("Stat", "f_bavail f_frsize")
    monkeypatch.setattr(torch, "save", half_then_fail)
    monkeypatch.setattr(checkpoint.os, "statvfs", lambda folder: Stat(0, 4096))
    with pytest.raises(CheckpointNotWritten, match=r"the disk holding .* is full \(no space left on device\); the "
                                                    r"partial file was removed: free space there"):
        atomic_save(BIG, str(tmp_path / "step_00000005.pt"))
    assert os.listdir(tmp_path) == []


def test_a_file_that_was_never_a_checkpoint_is_named_so_without_advising_its_deletion(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("resume from here\n")
    with pytest.raises(CorruptCheckpoint) as caught:
        safe_load(str(notes))
    assert str(caught.value).startswith(f"{notes} is not a checkpoint (not a file torch.save writes): point "
                                        "resume_from at a checkpoint an earlier run wrote")
    assert "delete" not in str(caught.value) and notes.exists()
    damaged = tmp_path / "step_00000005.pt"                     # named as a checkpoint: a damaged one
    damaged.write_bytes(b"not a checkpoint")
    with pytest.raises(CorruptCheckpoint, match=r"cannot be read \(not in the format torch.save writes: damaged\); "
                                                 "delete it and resume from an earlier one"):
        safe_load(str(damaged))
    atomic_save({"step": 3}, str(tmp_path / "step_00000003.pt"))
    assert safe_load(str(tmp_path / "step_00000003.pt")) == {"step": 3}
