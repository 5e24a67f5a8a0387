"""`evalkit-eval`: the quick evaluation a user comes for.

Runs the baseline and every installed wrapper on a smoke-scale task over several seeds (one Hydra
multirun, one MLflow parent run), then prints the verdict table and writes the report.

    evalkit-eval                                  # every installed wrapper, 5 seeds, mlp_regression
    evalkit-eval --trainers lightning,accelerate --seeds 8 -- precision=bf16_mixed
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

from omegaconf import OmegaConf

from evalkit.sweep import SWEEP_NAME_ENV
from evalkit.tracking import fix_default_uri, resolve_uri

CONF = Path(__file__).parent / "conf"
SMOKE = ["task.n_train=512", "task.n_val=128", "train.max_steps=40", "train.val_every=20",
         "tracking.progress_interval_s=30"]


def installed_trainers() -> tuple[list[str], dict[str, str]]:
    """Trainer configs whose wrapper is importable, and for the others the extra that installs them."""
    ready, missing = [], {}
    for path in sorted((CONF / "trainer").glob("*.yaml")):
        trainer = OmegaConf.load(path)
        absent = [m for m in trainer.get("requires", []) if importlib.util.find_spec(m) is None]
        if absent:
            missing[path.stem] = trainer.get("extra", "")
        else:
            ready.append(path.stem)
    ready.sort(key=lambda name: name != "baseline")
    return ready, missing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="evalkit-eval", description=__doc__.split("\n\n")[0])
    parser.add_argument("--trainers", help="comma-separated trainers (default: baseline + every installed wrapper)")
    parser.add_argument("--seeds", type=int, default=5, help="seeds per arm (default 5)")
    parser.add_argument("--out", default="verdict", help="report directory (default ./verdict)")
    parser.add_argument("--scenario", default="balanced", help="ranking weights: balanced, research, platform")
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides for every job (after --)")
    args = parser.parse_args(argv)

    ready, missing = installed_trainers()
    trainers = args.trainers.split(",") if args.trainers else ready
    if "baseline" not in trainers:
        trainers.insert(0, "baseline")
    unknown = [t for t in trainers if t not in ready]
    if unknown:
        hints = ", ".join(f"{t}: pip install -e '.[{missing[t]}]'" if t in missing else f"{t}: no such trainer"
                          for t in unknown)
        print(f"evalkit-eval: cannot run {hints}", file=sys.stderr)
        return 2
    for name, extra in missing.items():
        print(f"evalkit-eval: skipping {name} (not installed: pip install -e '.[{extra}]')", file=sys.stderr)

    uri = resolve_uri(None) if os.environ.get("MLFLOW_TRACKING_URI") else fix_default_uri()
    sweep = f"quick-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:4]}"
    jobs = len(trainers) * args.seeds
    print(f"evalkit-eval: {jobs} jobs ({', '.join(trainers)} x {args.seeds} seeds), sweep {sweep}, store {uri}",
          file=sys.stderr, flush=True)
    command = [os.path.join(os.path.dirname(sys.executable), "evalkit"), "-m", f"trainer={','.join(trainers)}",
               f"seed={','.join(str(s) for s in range(args.seeds))}", *SMOKE, *args.overrides]
    started = time.monotonic()
    train = subprocess.run(command, env={**os.environ, SWEEP_NAME_ENV: sweep, "MLFLOW_TRACKING_URI": uri})
    print(f"evalkit-eval: training done in {time.monotonic() - started:.0f} s"
          f"{'' if train.returncode == 0 else ' (some jobs failed: see the functional column)'}; judging...",
          file=sys.stderr, flush=True)

    from evalkit.verdict.cli import main as verdict

    code = verdict(["--tracking-uri", uri, "--sweep-id", sweep, "--out", args.out, "--scenario", args.scenario])
    return code or (1 if train.returncode else 0)


if __name__ == "__main__":
    sys.exit(main())
