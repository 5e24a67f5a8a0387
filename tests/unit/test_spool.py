"""A full disk while the spool is written: the refused write is undone (no half record is ever read), the
worker fails with one line naming the spool's folder, and every record written before it is shipped."""
from __future__ import annotations

import errno
import json

import pytest

from evalkit.spool import SpoolFull, SpoolTail, SpoolWriter, records_path


def test_a_refused_write_is_undone_and_named_and_the_whole_records_before_it_stay(tmp_path, monkeypatch):
    writer = SpoolWriter(str(tmp_path), 0)
    for step in (1, 2):
        writer.add({"step": step, "loss": 0.5})
        writer.flush()
    writer.fill_device()
    writer.add({"step": 3, "loss": 0.25, "pad": "x" * 500})
    with pytest.raises(SpoolFull) as raised:
        writer.flush()
    assert raised.value.errno == errno.ENOSPC and str(tmp_path) in str(raised.value)
    data = open(records_path(str(tmp_path), 0), "rb").read()
    assert data.endswith(b"\n") and [json.loads(line)["step"] for line in data.splitlines()] == [1, 2]
    assert [r["step"] for r in SpoolTail(str(tmp_path), 0).read_new()] == [1, 2]
    writer.close()                                       # the failure was reported: closing does not raise again

    short = SpoolWriter(str(tmp_path / "short"), 0)      # a short write (the device filled during it) is one too
    monkeypatch.setattr("evalkit.spool.os.write", lambda fd, data: len(data) // 3)
    short.add({"step": 1})
    with pytest.raises(SpoolFull, match="short write"):
        short.flush()
