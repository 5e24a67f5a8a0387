#!/usr/bin/env python
"""A job's OpenMP threads beside another busy process: the same `evalkit` job with its workers' threads spinning
while they wait (OMP_WAIT_POLICY=ACTIVE, GNU OpenMP's default) and sleeping (PASSIVE, evalkit's default for its
workers), and on one thread, each alone and beside one busy process, side by side in one run. Prints every wall
time (median of the repeats) and the ratios.

    python scripts/bench_threads.py                     # 300 steps, hardware.threads=0 (the machine's cores)
    python scripts/bench_threads.py --steps 100 --repeats 3

Measured on the 2-core build machine (2026-12-02): beside a busy process 104-108 s spinning, 18 s passive,
15-17 s on one thread; alone 16.7 s spinning, 14.3 s passive.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

EVALKIT = os.path.join(os.path.dirname(sys.executable), "evalkit")
VARIANTS = [("spinning", "ACTIVE", "0"), ("passive", "PASSIVE", "0"), ("one thread", "PASSIVE", "1")]


def one_job(folder: str, steps: int, policy: str, threads: str) -> float:
    """Wall seconds of one job, from the command's start to its end (a fresh store each time)."""
    run = tempfile.mkdtemp(dir=folder)
    env = {**os.environ, "OMP_WAIT_POLICY": policy, "MLFLOW_DISABLE_TELEMETRY": "true"}
    env.pop("MLFLOW_TRACKING_URI", None)
    started = time.perf_counter()
    proc = subprocess.run([EVALKIT, f"train.max_steps={steps}", "task.n_train=2048", f"hardware.threads={threads}",
                           "tracking.progress=quiet", "hydra.run.dir=run"], cwd=run, env=env,
                          capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        sys.exit(f"bench_threads: the job failed ({policy}, hardware.threads={threads}):\n{proc.stderr[-2000:]}")
    shutil.rmtree(run, ignore_errors=True)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="evalkit-bench-threads-")
    times: dict[tuple[str, str], float] = {}
    try:
        for beside in ("alone", "beside a busy process"):
            busy = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if beside != "alone" else None
            try:
                for name, policy, threads in VARIANTS:
                    runs = [one_job(folder, args.steps, policy, threads) for _ in range(args.repeats)]
                    times[beside, name] = statistics.median(runs)
                    print(f"{beside:>22} | {name:<10} | {times[beside, name]:6.1f} s", flush=True)
            finally:
                if busy:
                    busy.kill()
                    busy.wait()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    for beside in ("alone", "beside a busy process"):
        spin, passive, one = (times[beside, name] for name, _, _ in VARIANTS)
        print(f"{beside}: spinning / passive = {spin / passive:.2f}, passive / one thread = {passive / one:.2f}")


if __name__ == "__main__":
    main()
