"""A sweep's ledger written by processes of two hosts at once (controller/sweep/ledger.py): nothing lost, nothing
doubled (issue 47). Each writer is a real process filing its entries as a separate host would (its own host name), into
one folder, all at the same time, as a sweep's jobs on two SLURM nodes do into a shared sweep directory."""
from __future__ import annotations

import os
import subprocess
import sys

from evalkit.controller.sweep import ledger

ENTRIES = 300
WRITER = """
import sys
from evalkit.controller.sweep import ledger
folder, host = sys.argv[1], sys.argv[2]
sys.stdin.readline()                     # start together
for i in range({n}):
    ledger.add(folder, {{"host": host, "i": i, "ok": True}})
"""


def test_two_hosts_filing_at_once_lose_nothing_and_double_nothing(tmp_path):
    folder = str(tmp_path / ".evalkit_jobs_s1")
    writers = [subprocess.Popen([sys.executable, "-c", WRITER.format(n=ENTRIES), folder, host], text=True,
                                stdin=subprocess.PIPE, env={**os.environ, ledger.HOST_ENV: host})
               for host in ("node1", "node2")]
    for w in writers:
        w.stdin.write("go\n")
        w.stdin.flush()
    assert [w.wait(timeout=120) for w in writers] == [0, 0]
    filed = ledger.entries(folder)
    seen = sorted((e["host"], e["i"]) for e in filed)
    assert seen == sorted((h, i) for h in ("node1", "node2") for i in range(ENTRIES))
    assert not [p for p in (tmp_path / ".evalkit_jobs_s1").iterdir() if p.name.endswith(".tmp")]
