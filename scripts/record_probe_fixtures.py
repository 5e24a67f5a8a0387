"""Record the evidence of every planted variant the e2e tests train, as the unit tier's fixtures.

    python scripts/record_probe_fixtures.py                # every planted semantics (about 4 minutes on 2 cores)
    python scripts/record_probe_fixtures.py --keep /tmp/x  # and keep the scratch store there

Run it when what a job records changes (a new column in the records, a new observer, a changed task or
caliber), or when a planted variant is added to tests/planted/planted_loop.py and to helpers.SEMANTICS_SETTINGS:
the e2e tier's live run of each family fails with "the recording no longer matches" until then.

It trains the planted loop (tests/planted/planted_loop.py) with the real `evalkit -m probe=semantics` in a scratch
folder, one multirun per group of helpers.SEMANTICS_SETTINGS plus the correct loop (`none`), and writes each probe
run's stored evidence (`probe/semantics_evidence.json`, what its judge read) gzipped to
tests/fixtures/semantics/planted/<variant>.json.gz. Nothing is judged here: the unit tests judge the recordings.
"""
from __future__ import annotations

import argparse
import gzip
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path.insert(0, str(TESTS))

from helpers import PLANTED, RECORDED_SEMANTICS, SEMANTICS_SETTINGS, store_uri  # noqa: E402

from evalkit import names  # noqa: E402

PLANTED_TRAINER = ["trainer._target_=planted_loop.PlantedAdapter", "trainer.name=planted"]


def evalkit(scratch: Path, *overrides: str) -> None:
    script = os.path.join(os.path.dirname(sys.executable), "evalkit")
    command = [script] if os.path.exists(script) else [sys.executable, "-m", "evalkit"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(PLANTED), os.environ.get("PYTHONPATH")])),
           "MLFLOW_DISABLE_TELEMETRY": "true"}
    env.pop("MLFLOW_TRACKING_URI", None)
    print(f"record: evalkit -m {' '.join(overrides)}", file=sys.stderr, flush=True)
    done = subprocess.run([*command, "-m", "probe=semantics", *PLANTED_TRAINER, *overrides,
                           "tracking.progress_interval_s=1000"], cwd=scratch, env=env)
    if done.returncode:
        raise SystemExit(f"record: the sweep failed (exit {done.returncode}); nothing written")


def export(scratch: Path, out: Path) -> list[str]:
    """Each probe run's evidence, by its planted variant, into out/<variant>.json.gz."""
    from mlflow.tracking import MlflowClient

    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    client = MlflowClient(store_uri(scratch))
    exp = client.get_experiment_by_name("evalkit").experiment_id
    written = []
    out.mkdir(parents=True, exist_ok=True)
    for run in client.search_runs([exp], f"tags.`{names.ROLE}` = 'probe'", max_results=1000):
        variant = run.data.params["trainer.options.wrong"]
        path = client.download_artifacts(run.info.run_id, "probe/semantics_evidence.json", str(scratch / "dl"))
        with open(path, "rb") as src, gzip.open(out / f"{variant}.json.gz", "wb", compresslevel=9) as dst:
            shutil.copyfileobj(src, dst)
        os.remove(path)
        written.append(variant)
    return sorted(written)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(RECORDED_SEMANTICS), help="fixture folder (default: %(default)s)")
    parser.add_argument("--keep", default=None, help="train in this folder and keep it (default: a temporary one)")
    args = parser.parse_args(argv)
    scratch = Path(args.keep or tempfile.mkdtemp(prefix="evalkit-record-"))
    scratch.mkdir(parents=True, exist_ok=True)
    try:
        evalkit(scratch, "probe.world_sizes=[1]", "probe.clip=[false]", "+trainer.options.wrong=none")
        for variants, setting in SEMANTICS_SETTINGS:
            evalkit(scratch, *setting, f"+trainer.options.wrong={','.join(variants)}")
        out = Path(args.out)
        for old in out.glob("*.json.gz"):
            old.unlink()
        written = export(scratch, out)
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    size = sum(p.stat().st_size for p in Path(args.out).glob("*.json.gz"))
    print(f"record: {len(written)} recordings ({size / 1024:.0f} KiB) in {args.out}: {', '.join(written)}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
