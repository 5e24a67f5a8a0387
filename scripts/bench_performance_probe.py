"""The performance probe judged over and over on planted copies of the baseline with a known truth (issue 31).

Each copy is `tests/planted/slow_loop.py`'s SlowBaselineAdapter; the probe runs at its own settings (or those
given), `--runs` times per copy, all in one run of this script on this machine. `--preset quick` runs it at the
settings the quick evaluation publishes with (its depths and time limit, evalkit.probes.performance.settings.PRESETS),
else at the probe's defaults:

- identical: an identical copy (must pass, never fail);
- slower: every step 10 % slower (must fail, never pass);
- jitter: 10 % slower with a 2 % jitter per step;
- startup: a fixed 20 ms start-up cost only (must pass: no per-step cost);
- slower3, slower5, slower7: every step 3, 5 and 7 % slower (near the 5 % budget: 3 % must not fail, 7 % must not
  pass, 5 % sits on the budget: any outcome, inconclusive the honest one);
- helper: 10 % of every step's work done by a helper thread while training goes on (must fail: the work a wrapper
  does off its main thread is its cost).

- `--trainer NAME`: a bundled trainer itself, as a copy named after it (`--mode defaults` for its quick start's
  settings): no known truth, but its runs show whether the intervals hold between processes.

Prints one line per probe run (outcome, the fraction at a 100 ms step with its interval, rounds, per width the
step ratio, the training memory difference, wall time), then per copy the outcome counts, the wall time of one
probe run, and the identical copies' training-memory differences (the judge's MEMORY_NOISE_MIB is calibrated on
them).

    python scripts/bench_performance_probe.py [--runs 10] [--copies identical,slower,jitter,startup]
        [--preset quick] [--override probe.performance.time_limit_s=30 ...] [--trainer lightning [--mode defaults]]

Per copy it also prints the runs' dispersion against their own intervals: the standard deviation of the estimates
over the root mean square of the standard errors the intervals were built from (about 1 when each run's interval
holds between processes; well above 1 when the runs differ by more than their intervals say), and the excess: the
spread between runs that no run's interval holds.
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
from collections import Counter
from pathlib import Path

from evalkit import names

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
ROOT = Path(__file__).resolve().parent.parent
COPIES = {
    "identical": ({"slower": 0.0}, "pass"),
    "slower": ({"slower": 0.1}, "fail"),
    "jitter": ({"slower": 0.1, "jitter": 0.02}, "fail"),
    "startup": ({"startup_ms": 20.0}, "pass"),
    "slower3": ({"slower": 0.03}, "not fail"),
    "slower5": ({"slower": 0.05}, "any outcome"),
    "slower7": ({"slower": 0.07}, "not pass"),
    "helper": ({"helper": 0.1}, "fail"),
}


def probe(workdir: str, options: dict, overrides: list[str]) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests" / "planted"),
                                                         os.environ.get("PYTHONPATH", "")])}
    env.pop("MLFLOW_TRACKING_URI", None)
    trainer = ([f"trainer={options['trainer']}", f"trainer.mode={options['mode']}"] if "trainer" in options else
               ["trainer._target_=slow_loop.SlowBaselineAdapter", "trainer.name=slow",
                *[f"+trainer.options.{k}={v}" for k, v in options.items()]])
    cmd = [os.path.join(os.path.dirname(sys.executable), "evalkit"), "probe=performance", *trainer,
           "tracking.progress_interval_s=1000", *overrides]
    started = time.monotonic()
    done = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True)
    seconds = time.monotonic() - started
    if done.returncode:
        sys.exit(f"evalkit failed ({done.returncode}):\n{done.stderr[-3000:]}")
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{workdir}/mlflow.db")
    exp = client.get_experiment_by_name("evalkit").experiment_id
    run = client.search_runs([exp], f"tags.`{names.ROLE}` = '{names.ROLE_PROBE}'",
                             order_by=["attributes.start_time DESC"])[0]
    folder = names.PROBE_ARTIFACT_DIR
    with open(client.download_artifacts(run.info.run_id, f"{folder}/{names.probe_result_file('performance')}")) as fh:
        result = json.load(fh)
    with open(client.download_artifacts(run.info.run_id, f"{folder}/{names.probe_evidence_file('performance')}")) as fh:
        turns = {job["name"]: job["summary"].get("turns") or {} for job in json.load(fh)}
    return {"result": result, "seconds": seconds, "turns": turns}


def round_spread(turns: dict) -> dict[str, float]:
    """Per width: the standard deviation of one round's log step-time ratio, wrapper / baseline."""
    import numpy as np

    out = {}
    for name, base in turns.items():
        if not name.endswith("-baseline") or not base.get("blocks_s"):
            continue
        width = name.split("-")[0]
        wrap = turns.get(f"{width}-wrapper", {}).get("blocks_s") or []
        n = min(len(base["blocks_s"]), len(wrap))
        if n > 2:
            out[width] = float(np.std(np.log(np.array(wrap[:n]) / np.array(base["blocks_s"][:n])), ddof=1))
    return out


def calibrate(block_ms: list[float], rounds: int, overrides: list[str]) -> None:
    """The spread of one round's log ratio between identical copies, per block length (schedule.py's choice)."""
    with tempfile.TemporaryDirectory(prefix="evalkit-bench-perf-") as workdir:
        for ms in block_ms:
            p = probe(workdir, {"slower": 0.0}, [f"probe.performance.block_ms={ms}",
                                                 f"probe.performance.max_rounds={rounds}",
                                                 "probe.performance.time_limit_s=100000", *overrides])
            spread = round_spread(p["turns"])
            steps = {n.split("-")[0]: t.get("steps_per_block") for n, t in p["turns"].items() if "baseline" in n}
            print(f"block {ms:g} ms: " + "; ".join(f"{w} ({steps[w]} steps) sd {100 * s:.1f}%"
                                                   for w, s in spread.items())
                  + f"; {p['seconds']:.0f} s", flush=True)


def dispersion(runs: list[dict]) -> str:
    """The runs' estimates against their intervals: sd of the estimates / RMS standard error, and the excess spread
    (sqrt(var - mean se^2), 0 when the intervals hold it), as percentages of the reference step."""
    import numpy as np
    from scipy import stats

    from evalkit.probes.performance.blocks import BATCHES

    rows = [p["result"]["figures"] for p in runs if "added_fraction" in p["result"]["figures"]]
    if len(rows) < 3:
        return "fewer than 3 runs measured: no dispersion"
    est = np.array([f["added_fraction"] for f in rows])
    # each run's interval: estimate +- t(level, batches - 1) * se (blocks.interval), PROCESS_SD included in se
    se = np.array([(f["added_fraction_high"] - f["added_fraction_low"]) / 2
                   / stats.t.ppf(0.5 + f["level"] / 2, min(BATCHES, int(f["rounds"])) - 1) for f in rows])
    sd, rms = float(est.std(ddof=1)), float(np.sqrt(np.mean(se ** 2)))
    excess = float(np.sqrt(max(0.0, sd ** 2 - rms ** 2)))
    return (f"estimates {100 * est.mean():+.2f}% mean, sd {100 * sd:.2f}% against the intervals' standard error "
            f"{100 * rms:.2f}% (ratio {sd / rms:.2f}); spread between runs beyond their intervals {100 * excess:.2f}%")


def status(result: dict) -> str:
    return "inconclusive" if result.get("inconclusive") else "pass" if result["passed"] else "fail"


def line(name: str, i: int, p: dict) -> str:
    r, f = p["result"], p["result"]["figures"]
    sizes = sorted({k.split("/")[0] for k in f if k[:1] == "d" and k[1:2].isdigit() and "/" in k},
                   key=lambda k: int(k[1:]))
    ratios = " ".join(f"{w} {f.get(w + '/ratio', float('nan')):.3f}" for w in sizes)
    memory = [f.get(f"{w}/train_mib/wrapper", 0) - f.get(f"{w}/train_mib/baseline", 0) for w in sizes]
    frac = (f"{100 * f['added_fraction']:+.2f}% [{100 * f['added_fraction_low']:+.2f}, "
            f"{100 * f['added_fraction_high']:+.2f}]" if "added_fraction" in f else "-")
    step = f"{f.get('reference_step_ms', 100):g} ms"
    return (f"{name} #{i + 1}: {status(r)}; {frac} of a {step} step, {f.get('rounds', 0):.0f} rounds; ratio {ratios}; "
            f"memory {' '.join(f'{m:+.1f}' for m in memory)} MiB; {p['seconds']:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--copies", help=f"default: {','.join(COPIES)} (with --trainer: none of them)")
    parser.add_argument("--preset", choices=["quick", "thorough"], help="the settings a preset publishes with")
    parser.add_argument("--override", action="append", default=[], help="a probe setting, e.g. probe.widths=[64]")
    parser.add_argument("--calibrate", default="", help="block lengths in ms (e.g. 5,20,80): the identical copy at "
                                                        "each, a fixed number of rounds, the spread of one round")
    parser.add_argument("--rounds", type=int, default=64, help="with --calibrate: rounds per block length")
    parser.add_argument("--trainer", help="a bundled trainer as a copy of its own (no known truth)")
    parser.add_argument("--mode", default="aligned", choices=["aligned", "defaults"], help="with --trainer")
    args = parser.parse_args()
    copies = args.copies.split(",") if args.copies else [] if args.trainer else list(COPIES)
    if args.trainer:
        COPIES[args.trainer] = ({"trainer": args.trainer, "mode": args.mode}, "any outcome")
        copies.append(args.trainer)
    if args.calibrate:
        calibrate([float(x) for x in args.calibrate.split(",")], args.rounds, args.override)
        return
    copies = [c for c in copies if c]
    unknown = [c for c in copies if c not in COPIES]
    if unknown:
        sys.exit(f"unknown copies {unknown}: choose from {', '.join(COPIES)}")
    if args.preset:
        from evalkit.probes.performance.settings import PRESETS

        args.override = [*PRESETS[args.preset].settings, *args.override]
        print(f"at the {args.preset} preset's settings: {' '.join(args.override)}", flush=True)
    results: dict[str, list[dict]] = {c: [] for c in copies}
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="evalkit-bench-perf-") as workdir:
        for i in range(args.runs):          # copy after copy within a run: the machine's state falls on all alike
            for name in copies:
                results[name].append(probe(workdir, COPIES[name][0], args.override))
                print(line(name, i, results[name][-1]), flush=True)
    print()
    for name in copies:
        counts = Counter(status(p["result"]) for p in results[name])
        wall = statistics.median(p["seconds"] for p in results[name])
        print(f"{name} ({COPIES[name][0]}, must {COPIES[name][1]}): pass {counts['pass']}, fail {counts['fail']}, "
              f"inconclusive {counts['inconclusive']} of {len(results[name])}; one probe run {wall:.0f} s (median)")
        print(f"  {dispersion(results[name])}")
    print(f"wall time of this benchmark: {(time.monotonic() - began) / 60:.1f} min")
    if "identical" in results:
        pairs = [(v, p["result"]["figures"].get(k.replace("baseline", "wrapper"), 0) - v)      # (baseline, gap)
                 for p in results["identical"] for k, v in p["result"]["figures"].items()
                 if k.endswith("/train_mib/baseline")]
        bases, diffs = [b for b, _ in pairs], [d for _, d in pairs]
        if diffs:
            print(f"identical copies' training memory, wrapper - baseline, every width: "
                  f"{min(diffs):+.2f} .. {max(diffs):+.2f} MiB (largest |difference| {max(map(abs, diffs)):.2f}; "
                  f"the baseline's {min(bases):.1f} .. {max(bases):.1f} MiB)")


if __name__ == "__main__":
    main()
