"""How often a process's first parallel region computes torch.tanh differently from every later call, with and
without evalkit's warm-up (`evalkit.worker.run.warm_up_torch`) first: the race that changed a job's data.

    python scripts/first_parallel_region.py [--runs 30] [--forks 100] [--threads 2]

Per condition: `--runs` fresh interpreters (as a worker started fresh) and `--forks` children forked from one
process that preloaded as a warm server does (`evalkit.worker.warm_server.preload`, nothing parallel run), each with
`--threads` intra-op threads, computing tanh over 2^19 normals twice. Printed: per
condition and start, the processes whose two results differ, with a 95 % Clopper-Pearson interval, and the largest
difference seen. Measured here (2 cores, torch 2.13 CPU): fresh, nothing first 3/40 and 5/40 (largest 5.2e-05),
with the warm-up 0/40; forked 0/200 both ways (a job forked from a warm server met it: 2 of 6 shared test sweeps).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from scipy.stats import binomtest

CHILD = """
import json, sys, torch
from evalkit.worker.run import warm_up_torch
torch.set_num_threads({threads})
a = torch.randn(1 << 19, generator=torch.Generator().manual_seed(0))
if {warm}:
    warm_up_torch()
first, second = torch.tanh(a), torch.tanh(a)
print(json.dumps((first - second).abs().max().item()))
"""


def fresh(threads: int, warm: bool) -> float:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "OMP_WAIT_POLICY": "PASSIVE"}
    out = subprocess.run([sys.executable, "-c", CHILD.format(threads=threads, warm=warm)], env=env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def forked(threads: int, warm: bool, n: int) -> list[float]:
    from evalkit.worker.warm_server import preload

    # what a warm server runs before it forks: nothing parallel
    preload("evalkit.adapters.baseline.BaselineAdapter", [])
    source = CHILD.format(threads=threads, warm=warm).replace("print(json.dumps(", "result = ((")
    code = compile(source, "child", "exec")
    diffs = []
    for _ in range(n):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            scope: dict = {}
            exec(code, scope)
            os.write(write, json.dumps(scope["result"]).encode())
            os._exit(0)
        os.close(write)
        diffs.append(json.loads(os.read(read, 100)))
        os.waitpid(pid, 0)
        os.close(read)
    return diffs


def row(label: str, diffs: list[float]) -> str:
    bad = sum(d > 0 for d in diffs)
    ci = binomtest(bad, len(diffs)).proportion_ci()
    return f"| {label} | {bad}/{len(diffs)} | {ci.low:.1%} – {ci.high:.1%} | {max(diffs):.2g} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30, help="fresh interpreters per condition")
    parser.add_argument("--forks", type=int, default=100, help="forked children per condition")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    os.environ.update(OMP_NUM_THREADS=str(args.threads), OMP_WAIT_POLICY="PASSIVE")
    print("| start, warm-up | first call differs | 95 % interval | largest difference |\n|---|---|---|---|")
    for warm in (False, True):
        label = "warm_up_torch first" if warm else "nothing first"
        print(row(f"fresh, {label}", [fresh(args.threads, warm) for _ in range(args.runs)]), flush=True)
        print(row(f"forked, {label}", forked(args.threads, warm, args.forks)), flush=True)


if __name__ == "__main__":
    main()
