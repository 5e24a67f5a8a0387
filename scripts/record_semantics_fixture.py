"""Record the semantic probe's jobs of one adapter at the truth caliber as a judge test fixture.

    python scripts/record_semantics_fixture.py tests/fixtures/semantics/baseline.json
    python scripts/record_semantics_fixture.py out.json --trainer lightning [--mode defaults]
    python scripts/record_semantics_fixture.py out.json --target planted_loop.PlantedAdapter \
        --pythonpath tests/planted \
        --override +trainer.options.wrong=lr.per_epoch --world-sizes 1

Runs `ws1-noclip`, then `ws1-clip` (seed 1, clipped at the lowest decile of the windows' largest partial sums along
the oracle's own run at that seed, `oracle.clip_norm_for`), then the same at world size 2 (gloo), then the short-epoch
job at the smallest world size (seed 3, `plan.short_epoch`: epochs shorter than one window), each with the
`evalkit` command in a scratch directory, reads each run back from its store (`evidence.load_job`) and writes
them all with `evidence.save_fixture`.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

from mlflow.tracking import MlflowClient

from evalkit import names
from evalkit.probes import evidence
from evalkit.probes.semantics.oracle import clip_norm_for
from evalkit.probes.semantics.plan import TRUTH_CALIBER, job_name, short_epoch, short_epoch_job_name


def _override(key: str, value: object) -> str:
    return f"{key}={'null' if value is None else value}"


def run_job(scratch: str, name: str, overrides: list[str], env: dict[str, str]) -> evidence.JobEvidence:
    run_dir = os.path.join(scratch, name)
    args = [sys.executable, "-m", "evalkit", *overrides, f"hydra.run.dir={run_dir}"]
    done = subprocess.run(args, cwd=scratch, env=env, capture_output=True, text=True)
    if not os.path.exists(os.path.join(run_dir, names.RUN_FILE)):
        raise SystemExit(f"{name}: no run recorded (exit {done.returncode})\n{done.stderr[-3000:]}")
    with open(os.path.join(run_dir, names.RUN_FILE)) as fh:
        run_id = json.load(fh)["run_id"]
    client = MlflowClient(f"sqlite:///{scratch}/mlflow.db")
    job = evidence.load_job(client, run_id, name)
    print(f"{name}: {job.status} ({len(job.steps)} steps) {job.failure_reason}", file=sys.stderr)
    return job


def record(trainer: list[str], env: dict[str, str], world_sizes: list[int]) -> list[evidence.JobEvidence]:
    caliber = [_override(k, v) for k, v in TRUTH_CALIBER.items()]
    jobs = []
    with tempfile.TemporaryDirectory(prefix="evalkit-semantics-") as scratch:
        for ws in world_sizes:
            dist = ["distributed=ddp", f"distributed.world_size={ws}"] if ws > 1 else []
            plain = run_job(scratch, job_name(ws, False), [*caliber, *trainer, *dist, "seed=0"], env)
            jobs.append(plain)
            norm = clip_norm_for(plain) if plain.params else None
            if norm is None:
                print(f"{plain.name}: no gradient norms, clip job skipped", file=sys.stderr)
                continue
            jobs.append(run_job(scratch, job_name(ws, True),
                                [*caliber, *trainer, *dist, "seed=1", f"train.grad_clip={norm!r}"], env))
        ws = min(world_sizes)
        dist = ["distributed=ddp", f"distributed.world_size={ws}"] if ws > 1 else []
        short = [_override(k, v) for k, v in short_epoch(ws).items()]
        jobs.append(run_job(scratch, short_epoch_job_name(ws), [*caliber, *short, *trainer, *dist, "seed=3"], env))
    return jobs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("output", help="the fixture's path (JSON)")
    parser.add_argument("--trainer", default="baseline", help="evalkit's trainer config (baseline, lightning, ...)")
    parser.add_argument("--mode", default=None, help="trainer.mode (aligned or defaults)")
    parser.add_argument("--target", default=None, help="trainer._target_ of an adapter class outside evalkit")
    parser.add_argument("--pythonpath", default=None, help="a folder the --target module is imported from")
    parser.add_argument("--override", action="append", default=[],
                        help="one more evalkit override, e.g. +trainer.options.wrong=lr.per_epoch (repeatable)")
    parser.add_argument("--world-sizes", default="1,2", help="comma-separated world sizes (default 1,2)")
    args = parser.parse_args(argv)

    trainer = [f"trainer={args.trainer}"]
    if args.mode:
        trainer.append(f"trainer.mode={args.mode}")
    if args.target:
        trainer += [f"trainer._target_={args.target}", f"trainer.name={args.target.split('.')[0]}"]
    trainer += args.override
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"}
    if args.pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.path.abspath(args.pythonpath),
                                                          env.get("PYTHONPATH", "")]))
    jobs = record(trainer, env, [int(w) for w in args.world_sizes.split(",")])
    evidence.save_fixture(jobs, args.output)
    print(f"wrote {len(jobs)} job(s) to {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
