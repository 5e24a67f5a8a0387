"""A sweep's ledger (controller/sweep/ledger.py): one file per entry, written whole, merged when read."""
from __future__ import annotations

import json

from evalkit.controller.sweep import ledger


def test_entries_come_back_whole_in_the_order_they_were_filed(tmp_path, monkeypatch):
    folder = str(tmp_path / ".evalkit_jobs_s1")
    assert ledger.entries(folder) == [] and ledger.last_change(folder) is None
    for i in range(5):
        monkeypatch.setenv(ledger.HOST_ENV, f"node{i % 2}")
        ledger.add(folder, {"run_id": f"r{i}", "ok": i != 3})
    assert [e["run_id"] for e in ledger.entries(folder)] == ["r0", "r1", "r2", "r3", "r4"]
    names = sorted(p.name for p in (tmp_path / ".evalkit_jobs_s1").iterdir())
    assert len(set(names)) == 5 and {n.split("-")[1] for n in names} == {"node0", "node1"}
    assert ledger.last_change(folder) is not None


def test_a_writer_killed_mid_entry_leaves_nothing_a_reader_takes_for_an_entry(tmp_path):
    folder = tmp_path / "ledger"
    ledger.add(str(folder), {"run_id": "a", "ok": True})
    (folder / ".00000000000000000001-node1-7-0.json.tmp").write_text('{"run_id": "b", "o')   # cut off by a kill
    assert ledger.entries(str(folder)) == [{"run_id": "a", "ok": True}]


def test_a_ledger_an_earlier_evalkit_wrote_is_read_and_added_to(tmp_path):
    legacy = tmp_path / ".evalkit_jobs_s0.jsonl"
    legacy.write_text(json.dumps({"run_id": "old", "ok": True}) + "\n")
    ledger.add(str(legacy), {"run_id": "new", "ok": False})
    assert [e["run_id"] for e in ledger.entries(str(legacy))] == ["old", "new"]
    assert ledger.path_for("/sweeps/a", "s1") == "/sweeps/a/.evalkit_jobs_s1"
