"""Where one job's wall time goes (issue 30, "measure first"), for the baseline and every installed wrapper.

    python scripts/job_cost.py [--jobs 3] [--trainers baseline,lightning,...] [--steps 40] [--workdir DIR]
                               [--starts fresh,warm] [Hydra overrides, e.g. task=tiny_lm]

Per trainer, one sweep `evalkit -m trainer=<t> seed=0,1,..` in a scratch directory with its own local store, then
per job, from its run directory: the controller's marks (job_phases.json, evalkit/controller/job/phases.py), the
worker's start-up milestones (spool/summary_rank0.json, seconds after the spawn) and the last step's wall time
(records/steps_rank0.csv). Printed: one markdown row per trainer, each part the median over its jobs (so the
medians need not add up to the median total exactly), the fixed cost (total minus training), the first job's total
(it pays what a sweep's later jobs reuse, e.g. a warm worker server), the sweep's wall time per job and the CLI's
time before the first job (the `evalkit` process started to that job's start); then where the controller's set-up
and the run's end go. A part a job did not reach shows "-".

`--starts fresh,warm` runs every trainer's sweep once per way of starting its workers (`hardware.worker_start`),
alternating, and adds a side-by-side table: the fixed cost each way and the median step time of the jobs' timed
window (`step_time_median_s`), whose ratio shows that a forked worker trains as fast as a fresh interpreter.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from evalkit import names
from evalkit.controller.job import phases
from evalkit.names import STARTUP_MILESTONES
from evalkit.trainers import installed_trainers

TRAINERS = ("baseline", "lightning", "fabric", "accelerate", "hf_trainer", "ignite")
_SCRIPT = Path(sys.executable).with_name("evalkit")
EVALKIT = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "evalkit"]
# (column, from point, to point): consecutive, so that they add up to the total
PARTS = (("controller set-up", "job_start", "spawn"),
         ("process + torch + evalkit imports", "spawn", "torch_imported"),
         ("wrapper import", "torch_imported", "wrapper_imported"),
         ("task build + wrap to 1st forward", "wrapper_imported", "first_forward"),
         ("training (1st forward to last step)", "first_forward", "last_step"),
         ("shipping + run end", "last_step", "run_finished"))
TOTAL, TRAINING = ("total", "job_start", "run_finished"), PARTS[4][0]
SPLITS = (("job start to run recorded", "job_start", "run_recorded"),
          ("run recorded to spawn", "run_recorded", "spawn"),
          ("last step to workers ended", "last_step", "workers_ended"),
          ("workers ended to run finished", "workers_ended", "run_finished"))


@dataclass
class Sweep:
    trainer: str                     # the row's label (the trainer, and how its workers started)
    launched: float                  # time.time() as the `evalkit -m` process was started
    ended: float                     # ... as it exited
    jobs: list[dict[str, float]]     # each job's points (job_points)
    rc: int = 0
    step_times: list[float] = field(default_factory=list)    # each job's median step time (s)


def step_time(run_dir: Path) -> float | None:
    """The job's median step time over its timed window (the worker's summary), None when not recorded."""
    try:
        value = json.loads((run_dir / names.SPOOL_DIR / names.summary_file(0)).read_text()).get("step_time_median_s")
    except (OSError, ValueError):
        return None
    return None if value is None else float(value)


def start_table(pairs: list[tuple[Sweep, Sweep]]) -> str:
    """Side by side per trainer: fixed cost and median step time (ms) fresh and warm, and warm / fresh."""
    rows = []
    for fresh, warm in pairs:
        fixed = [_median([job_parts(p)["fixed cost"] for p in s.jobs]) for s in (fresh, warm)]
        steps = [statistics.median(s.step_times) if s.step_times else None for s in (fresh, warm)]
        ratio = f"{steps[1] / steps[0]:.2f}" if None not in steps else "-"
        rows.append([fresh.trainer.split(" ")[0], *fixed,
                     *(f"{v * 1000:.1f}" if v is not None else "-" for v in steps), ratio])
    return _table(["trainer", "fixed cost fresh (s)", "fixed cost warm (s)", "step fresh (ms)", "step warm (ms)",
                   "step warm / fresh"], rows)


def job_points(run_dir: Path) -> dict[str, float]:
    """A job's points in time (wall clock): the controller's marks, `spawn` (the workers started), the worker's
    start-up milestones and `last_step` (the last optimizer step's end)."""
    points = phases.read(str(run_dir))
    if "workers_start" in points:
        points["spawn"] = points["workers_start"]
        try:
            summary = json.loads((run_dir / names.SPOOL_DIR / names.summary_file(0)).read_text())
        except (OSError, ValueError):
            summary = {}
        for m in STARTUP_MILESTONES:
            if summary.get(f"startup_{m}_s") is not None:
                points[m] = points["spawn"] + float(summary[f"startup_{m}_s"])
    try:
        with open(run_dir / names.STEPS_CSV) as fh:
            walls = [row["wall"] for row in csv.DictReader(fh) if row.get("wall")]
        if walls:
            points["last_step"] = float(walls[-1])
    except OSError:
        pass
    return points


def _span(points: dict[str, float], start: str, end: str) -> float | None:
    return points[end] - points[start] if start in points and end in points else None


def job_parts(points: dict[str, float]) -> dict[str, float | None]:
    """Seconds per part, the total and the fixed cost (total minus training) of one job; None: not reached."""
    parts = {name: _span(points, start, end) for name, start, end in (*PARTS, TOTAL, *SPLITS)}
    total, training = parts["total"], parts[TRAINING]
    parts["fixed cost"] = None if total is None or training is None else total - training
    return parts


def _median(values: list[float | None]) -> str:
    known = [v for v in values if v is not None]
    return f"{statistics.median(known):.2f}" if known else "-"


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = [header, ["---"] * len(header), *rows]
    return "\n".join("| " + " | ".join(cells) + " |" for cells in lines)


def cost_table(sweeps: list[Sweep]) -> str:
    """The markdown table: per trainer the median seconds of each part over its jobs, the total, the fixed cost,
    the first job's total, the sweep's wall time per job and the CLI's time before its first job."""
    columns = [name for name, _, _ in PARTS] + ["total", "fixed cost"]
    rows = []
    for sweep in sweeps:
        parts = [job_parts(points) for points in sweep.jobs]
        starts = [points["job_start"] for points in sweep.jobs if "job_start" in points]
        first = _median([parts[0]["total"]] if parts else [])
        per_job = f"{(sweep.ended - sweep.launched) / len(sweep.jobs):.2f}" if sweep.jobs else "-"
        cli = f"{min(starts) - sweep.launched:.2f}" if starts else "-"
        rows.append([sweep.trainer, str(len(sweep.jobs)), *(_median([p[c] for p in parts]) for c in columns),
                     first, per_job, cli])
    return _table(["trainer", "jobs", *columns, "1st job total", "sweep wall / job", "CLI before 1st job"], rows)


def splits_table(sweeps: list[Sweep]) -> str:
    """Where the controller's set-up and the run's end go (medians over the jobs)."""
    names = [name for name, _, _ in SPLITS]
    rows = [[s.trainer, *(_median([job_parts(p)[n] for p in s.jobs]) for n in names)] for s in sweeps]
    return _table(["trainer", *names], rows)


def run_sweep(trainer: str, jobs: int, steps: int, overrides: list[str], scratch: Path) -> Sweep:
    """One `evalkit -m` sweep of `jobs` seeds in `scratch` (its own local store), and its jobs' points."""
    scratch.mkdir(parents=True, exist_ok=True)
    sweep_dir = scratch / "sweep"
    cmd = [*EVALKIT, "-m", f"trainer={trainer}", "seed=" + ",".join(str(s) for s in range(jobs)),
           f"train.max_steps={steps}", "train.val_every=0", "tracking.progress=quiet", f"hydra.sweep.dir={sweep_dir}",
           *overrides]
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "EVALKIT_DEFAULT_TRACKING_URI")}
    with open(scratch / "evalkit.log", "w") as log:
        launched = time.time()
        rc = subprocess.run(cmd, cwd=scratch, env=env, stdout=log, stderr=subprocess.STDOUT).returncode
        ended = time.time()
    dirs = sorted((d for d in sweep_dir.glob("*") if d.is_dir() and d.name.isdigit()), key=lambda d: int(d.name))
    if rc:
        print(f"{trainer}: evalkit exited {rc}; its output: {scratch / 'evalkit.log'}", file=sys.stderr)
    times = [t for t in (step_time(d) for d in dirs) if t is not None]
    label = trainer + "".join(f" ({o.split('=', 1)[1]})" for o in overrides if o.startswith("hardware.worker_start="))
    return Sweep(label, launched, ended, [job_points(d) for d in dirs], rc, times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=3, help="jobs (seeds) per trainer, one sweep")
    parser.add_argument("--trainers", default=",".join(TRAINERS))
    parser.add_argument("--steps", type=int, default=40, help="train.max_steps of each job")
    parser.add_argument("--workdir", type=Path, help="keep the sweeps here (default: a temporary folder)")
    parser.add_argument("--starts", default="", help="e.g. fresh,warm: each trainer's sweep once per way its "
                        "workers start (hardware.worker_start), and a side-by-side table")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides for every job")
    args = parser.parse_args(argv)
    ready, missing = installed_trainers()
    trainers = []
    for name in args.trainers.split(","):
        if name in ready:
            trainers.append(name)
        else:
            print(f"{name}: skipped, {missing.get(name, 'not a bundled trainer')}", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="evalkit-job-cost-") as tmp:
        root = args.workdir or Path(tmp)
        sweeps = []
        starts = [s for s in args.starts.split(",") if s]
        for name in trainers:
            for start in starts or [None]:
                print(f"{name}: {args.jobs} jobs{f' ({start})' if start else ''} ...", file=sys.stderr, flush=True)
                extra = [f"hardware.worker_start={start}"] if start else []
                sweeps.append(run_sweep(name, args.jobs, args.steps, [*args.overrides, *extra],
                                        root / (f"{name}-{start}" if start else name)))
    print(f"Seconds per job, median over {args.jobs} jobs of {args.steps} steps each:\n")
    print(cost_table(sweeps))
    print("\nThe controller's set-up and the run's end, split (medians, seconds):\n")
    print(splits_table(sweeps))
    if starts == ["fresh", "warm"]:
        print("\nFresh interpreters and forked workers side by side (each trainer's two sweeps one after the "
              "other):\n")
        print(start_table([(sweeps[i], sweeps[i + 1]) for i in range(0, len(sweeps), 2)]))
    return 1 if any(s.rc for s in sweeps) else 0


if __name__ == "__main__":
    sys.exit(main())
