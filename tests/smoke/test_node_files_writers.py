"""The files the nodes of one job write into its shared folder (controller/job/nodes.py), written by real processes at
once, as nodes on two SLURM hosts do (issue 47): the stop request, which any node may file, has exactly one author
whose cause stays; a beacon rewritten every beat is never read half-written; nothing temporary is left behind.
(The sweep's ledger has its own test: test_ledger_writers.py.)"""
from __future__ import annotations

import os
import subprocess
import sys

from evalkit.controller.job import nodes

ROUNDS = 200
ASKER = """
import os, sys
from evalkit.controller.job import nodes
root, me = sys.argv[1], sys.argv[2]
sys.stdin.readline()                     # start together
won = [r for r in range({n}) if nodes.ask_to_stop(os.path.join(root, str(r)), me)]
print(" ".join(map(str, won)))
"""
BEATER = """
import sys
from evalkit.controller.job import nodes
path = sys.argv[1]
for beat in range({n}):
    nodes._write_json(path, {{"beat": beat, "pad": "x" * 4096}})
"""


def test_nodes_asking_to_stop_at_once_leave_one_request_whose_cause_stays(tmp_path):
    askers = {me: subprocess.Popen([sys.executable, "-c", ASKER.format(n=ROUNDS), str(tmp_path), me], text=True,
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE) for me in ("node0", "node1")}
    for proc in askers.values():
        proc.stdin.write("go\n")
        proc.stdin.flush()
    won = {me: {int(r) for r in proc.communicate(timeout=120)[0].split()} for me, proc in askers.items()}
    assert [p.returncode for p in askers.values()] == [0, 0]
    assert won["node0"].isdisjoint(won["node1"]) and won["node0"] | won["node1"] == set(range(ROUNDS))
    for me, rounds in won.items():
        for r in rounds:                                   # the winner's cause is the one every node reads
            assert nodes._read_json(nodes.stop_path(str(tmp_path / str(r))))["why"] == me
    assert not [p for p in tmp_path.rglob("*") if ".tmp-" in p.name]


def test_a_beacon_rewritten_while_another_node_reads_it_is_never_seen_half_written(tmp_path):
    path = str(tmp_path / ".evalkit-node1.json")
    nodes._write_json(path, {"beat": -1})
    beater = subprocess.Popen([sys.executable, "-c", BEATER.format(n=3000), path])
    reads, torn, beats = 0, 0, set()
    while beater.poll() is None or reads == 0:
        seen = nodes._read_json(path)
        reads += 1
        if seen is None:
            torn += 1
        else:
            beats.add(seen["beat"])
    assert beater.returncode == 0
    assert torn == 0, f"{torn} of {reads} reads saw a half-written beacon"
    assert len(beats) > 1                                  # the reads overlapped the rewrites
    assert os.listdir(tmp_path) == [".evalkit-node1.json"]
