"""The performance probe's power and repeatability, measured: a planted 10 %-slower copy of the baseline
(tests/planted/slow_loop.py: every step waits 10 % of its own work) probed twice, an identical copy once, all in
one run on this machine. Prints per probe run the step-time ratio with its 95 % interval, the per-step cost the
probe measured against the one planted, whether the two runs' intervals overlap, and whether the identical copy
was reported slower. Figures, not asserts: the machine's noise decides how many pairs a 10 % difference needs.

    python scripts/bench_performance_probe.py [--repeats 12] [--width 256] [--steps 100] [--slower 0.1]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
ROOT = Path(__file__).resolve().parent.parent


def probe(workdir: str, slower: float, args) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests" / "planted"),
                                                         os.environ.get("PYTHONPATH", "")])}
    env.pop("MLFLOW_TRACKING_URI", None)
    cmd = [os.path.join(os.path.dirname(sys.executable), "evalkit"), "probe=performance",
           "trainer._target_=slow_loop.SlowBaselineAdapter", "trainer.name=slow", f"+trainer.options.slower={slower}",
           f"probe.repeats={args.repeats}", f"probe.widths=[{args.width}]", f"probe.steps={args.steps}",
           "tracking.progress_interval_s=1000"]
    started = time.monotonic()
    done = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"evalkit failed ({done.returncode}):\n{done.stderr[-3000:]}")
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{workdir}/mlflow.db")
    exp = client.get_experiment_by_name("evalkit").experiment_id
    run = client.search_runs([exp], "tags.`evalkit.role` = 'probe'", order_by=["attributes.start_time DESC"])[0]
    with open(client.download_artifacts(run.info.run_id, "probe/performance.json")) as fh:
        result = json.load(fh)
    with open(client.download_artifacts(run.info.run_id, "probe/performance_evidence.json")) as fh:
        jobs = json.load(fh)
    planted = [j["effective"].get("planted_added_ms", 0.0) for j in jobs if j["name"].endswith("-wrapper")]
    return {"result": result, "planted_ms": statistics.median(planted), "seconds": time.monotonic() - started}


def line(name: str, slower: float, p: dict, width: int) -> str:
    f, key = p["result"]["figures"], f"h{width}"
    ratio = f"{f[key + '/ratio']:.3f} [{f[key + '/ratio_low']:.3f}, {f[key + '/ratio_high']:.3f}]"
    added = f"{f[key + '/added_ms']:.3f} ms [{f[key + '/added_ms_low']:.3f}, {f[key + '/added_ms_high']:.3f}]"
    cost = (f", planted {p['planted_ms']:.3f} ms ({100 * (f[key + '/added_ms'] / p['planted_ms'] - 1):+.0f}%)"
            if p["planted_ms"] else "")
    status = p["result"].get("inconclusive") and "inconclusive" or ("pass" if p["result"]["passed"] else "fail")
    return (f"{name} (slower={slower}): step ratio {ratio}, added {added}{cost}; baseline "
            f"{f[key + '/baseline_ms']:.3f} ms/step; {status}; {'stable' if f[key + '/stable'] else 'UNSTABLE'}; "
            f"{p['seconds']:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=12)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--slower", type=float, default=0.1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="evalkit-bench-perf-") as workdir:
        runs = [("slower copy, run 1", args.slower), ("slower copy, run 2", args.slower), ("identical copy", 0.0)]
        results = []
        for name, slower in runs:
            results.append(probe(workdir, slower, args))
            print(line(name, slower, results[-1], args.width), flush=True)
    key = f"h{args.width}/ratio"
    a, b, same = (r["result"]["figures"] for r in results)
    overlap = a[key + "_low"] <= b[key + "_high"] and b[key + "_low"] <= a[key + "_high"]
    print(f"slower copy reported slower (interval above 1.0): run 1 {a[key + '_low'] > 1.0}, "
          f"run 2 {b[key + '_low'] > 1.0}")
    print(f"two runs' intervals overlap: {overlap}")
    print(f"identical copy reported slower: {same[key + '_low'] > 1.0}")
    for r in results[:2]:
        f = r["result"]["figures"]
        print(f"per-step cost within 20% of the planted one: "
              f"{abs(f[f'h{args.width}/added_ms'] / r['planted_ms'] - 1) <= 0.2}")


if __name__ == "__main__":
    main()
