"""Record the evidence of every planted variant the e2e tests train, as the unit tier's fixtures.

    python scripts/record_probe_fixtures.py                        # every probe (about 15 minutes on 2 cores)
    python scripts/record_probe_fixtures.py --probe stability      # one probe's runs only
    python scripts/record_probe_fixtures.py --probe semantics --keep /tmp/x   # and keep the scratch stores there

About how long each takes on 2 cores: semantics 4 minutes, consistency 1.5, customization 1, stability 6,
functional 1, maintenance 1, performance 2.5 (its jobs are timed: record it with nothing else running).

Run it when what a job records changes (a new column in the records, a new observer, a changed task, caliber or
probe plan), when a planted variant is added to tests/planted/ and to semantics_runs.SEMANTICS_SETTINGS or
probe_runs.PROBE_RUNS, or when a run's overrides there change: the e2e tier's live run of each family fails with
"the recording no longer matches" (naming the `--probe` to record again) until then.

Semantics: it trains the planted loop (tests/planted/planted_loop.py) with the real `evalkit -m probe=semantics` in a
scratch folder, one multirun per group of semantics_runs.SEMANTICS_SETTINGS plus the correct loop (`none`), and writes
each probe run's stored evidence (`probe/semantics_evidence.json`, what its judge read) gzipped to
tests/fixtures/semantics/planted/<variant>.json.gz.

The other six (consistency, customization, stability, functional, maintenance, performance): it runs each of
probe_runs.PROBE_RUNS[<dim>] exactly as its e2e module does (`probe_runs.run_probe_variant`: the same overrides and
environment; maintenance with the same fake wrapper and fake package index), one at a time, each in a store of its
own, and writes the probe run's `probe/<dim>_evidence.json` gzipped to tests/fixtures/<dim>/<name>.json.gz, and
what the probe measured besides its jobs (`probe/<dim>_measured.json`, customization and maintenance) to
<name>.measured.json.gz. The evidence keeps each distinct parameter vector once (a later copy, as a resumed or
killed job repeats its reference's, is written "=<job>/<step>"; probe_runs.recording expands it, and this script
checks that the expansion gives back every value): the parameters are most of a recording's bytes. Before it
replaces a probe's recordings, it judges each one again and requires the stored result's status, findings and
figure names back (a judge that read anything but its evidence would make the recording worthless).

Nothing else is judged here: tests/unit/probes/<dim>/ judges the recordings. A probe's old recordings are replaced
only when all its runs succeeded.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path.insert(0, str(TESTS))

from helpers import FIXTURES, PLANTED, store_uri  # noqa: E402
from probe_runs import (  # noqa: E402
    PROBE_RUNS,
    FakeIndex,
    expand_params,
    judged_recording,
    maintenance_index,
    result_shape,
    run_probe_variant,
)
from semantics_runs import RECORDED_SEMANTICS, SEMANTICS_SETTINGS  # noqa: E402

from evalkit import names  # noqa: E402

PLANTED_TRAINER = ["trainer._target_=planted_loop.PlantedAdapter", "trainer.name=planted"]
PROBES = ("semantics", *PROBE_RUNS)


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


def gzip_copy(src: str | Path, dst: Path) -> None:
    """`src` gzipped into `dst`, the same bytes for the same text (no name, no time in the header)."""
    with open(src, "rb") as fh, open(dst, "wb") as raw, \
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=9, mtime=0) as out:
        shutil.copyfileobj(fh, out)


def export(scratch: Path, out: Path) -> list[str]:
    """Each probe run's evidence, by its planted variant, into out/<variant>.json.gz."""
    from mlflow.tracking import MlflowClient

    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    client = MlflowClient(store_uri(scratch))
    exp = client.get_experiment_by_name("evalkit").experiment_id
    written = []
    out.mkdir(parents=True, exist_ok=True)
    for run in client.search_runs([exp], f"tags.`{names.ROLE}` = '{names.ROLE_PROBE}'", max_results=1000):
        variant = run.data.params["trainer.options.wrong"]
        path = client.download_artifacts(run.info.run_id, f"{names.PROBE_ARTIFACT_DIR}/"
                                         f"{names.probe_evidence_file('semantics')}", str(scratch / "dl"))
        gzip_copy(path, out / f"{variant}.json.gz")
        os.remove(path)
        written.append(variant)
    return sorted(written)


def record_semantics(scratch: Path, out: Path) -> list[str]:
    evalkit(scratch, "probe.world_sizes=[1]", "probe.clip=[false]", "+trainer.options.wrong=none")   # SGD and AdamW
    for variants, setting in SEMANTICS_SETTINGS:
        evalkit(scratch, *setting, f"+trainer.options.wrong={','.join(variants)}")
    for old in out.glob("*.json.gz"):
        old.unlink()
    return export(scratch, out)


# ------------------------------------------------------------------ the other six probes
def run_one(folder: Path, dim: str, name: str, *extra: str, site: Path | None = None) -> None:
    """One run of PROBE_RUNS[dim], as its e2e module runs it, into folder/mlflow.db."""
    folder.mkdir(parents=True, exist_ok=True)
    print(f"record: {dim} {name}: evalkit probe={dim} {' '.join(PROBE_RUNS[dim][name] + list(extra))}",
          file=sys.stderr, flush=True)
    start = time.monotonic()
    done = run_probe_variant(folder, dim, name, *extra, site=site, timeout=3600)
    if done.returncode:
        sys.stderr.write(done.stderr[-6000:])
        raise SystemExit(f"record: {dim} {name} failed (exit {done.returncode}); nothing of {dim} written")
    summary = [line for line in done.stderr.splitlines() if f"] {dim} probe" in line and ": job " not in line]
    print(f"record: {dim} {name}: {time.monotonic() - start:.0f} s; {' '.join(summary[-1:])}", file=sys.stderr,
          flush=True)


def run_all(scratch: Path, dim: str) -> dict[str, Path]:
    """Every run of PROBE_RUNS[dim], one at a time, each in a folder of its own: name -> folder."""
    folders = {name: scratch / dim / name for name in PROBE_RUNS[dim]}
    if dim != "maintenance":
        for name, folder in folders.items():
            run_one(folder, dim, name)
        return folders
    from fakedist import build_site

    site = build_site(Path(tempfile.mkdtemp(prefix="site-", dir=scratch)))
    cache, empty = scratch / dim / "cache", scratch / dim / "empty-cache"
    with FakeIndex() as index:
        for name, extra in maintenance_index(index.url, cache, empty).items():
            run_one(folders[name], dim, name, *extra, site=site)
    return folders


def compact_params(jobs: list[dict]) -> list[dict]:
    """The jobs with each parameter vector seen before (in this recording) stored as "=<job>/<step>", the first
    job and step that held it: a resume repeats its reference's vectors, a killed job its own up to the kill.
    probe_runs.expand_params undoes it."""
    first: dict[str, str] = {}
    out = []
    for job in jobs:
        params = {}
        for step, values in job["params"].items():
            key = json.dumps(values)
            params[step] = f"={first[key]}" if key in first else values
            first.setdefault(key, f"{job['name']}/{step}")
        out.append({**job, "params": params})
    return out


def export_probe_run(folder: Path, dim: str, name: str, out: Path) -> None:
    """The store's one probe run: its evidence (each distinct parameter vector once) and what it measured, gzipped
    into out/, after checking that the recording judged again gives back its stored result's status and findings."""
    from mlflow.tracking import MlflowClient

    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    client = MlflowClient(store_uri(folder))
    exp = client.get_experiment_by_name("evalkit").experiment_id
    (run,) = client.search_runs([exp], f"tags.`{names.ROLE}` = '{names.ROLE_PROBE}'")
    listed = {a.path for a in client.list_artifacts(run.info.run_id, names.PROBE_ARTIFACT_DIR)}

    def fetch(file: str) -> str | None:
        path = f"{names.PROBE_ARTIFACT_DIR}/{file}"
        return client.download_artifacts(run.info.run_id, path, str(folder / "export")) if path in listed else None

    with open(fetch(names.probe_evidence_file(dim))) as fh:
        jobs = json.load(fh)
    compact = compact_params(jobs)
    if expand_params(json.loads(json.dumps(compact))) != jobs:
        raise SystemExit(f"record: {dim} {name}: its parameters do not come back from the compact recording")
    text = "[\n" + ",\n".join(json.dumps(job) for job in compact) + "\n]\n"     # as evidence.save_fixture writes
    with open(out / f"{name}.json.gz", "wb") as raw, \
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=9, mtime=0) as dst:
        dst.write(text.encode())
    measured = fetch(names.probe_measured_file(dim))
    if measured is not None:
        gzip_copy(measured, out / f"{name}.measured.json.gz")
    with open(fetch(names.probe_result_file(dim))) as fh:
        stored = result_shape(json.load(fh))
    again = result_shape(judged_recording(dim, name, out))
    if again != stored:
        raise SystemExit(f"record: {dim} {name}: its recording judged again gives {again}, not the stored {stored}: "
                         f"nothing of {dim} written")
    print(f"record: {dim} {name}: {stored['status']}, findings {stored['findings']}", file=sys.stderr, flush=True)


def record_probe(dim: str, scratch: Path, out: Path) -> list[str]:
    shutil.rmtree(scratch / dim, ignore_errors=True)      # a kept scratch folder used again: its stores anew
    folders = run_all(scratch, dim)
    staged = scratch / dim / "fixtures"
    staged.mkdir(parents=True)
    for name, folder in folders.items():
        export_probe_run(folder, dim, name, staged)
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.json.gz"):
        old.unlink()
    for path in staged.iterdir():
        shutil.copy2(path, out / path.name)
    return sorted(folders)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--probe", default="all", choices=[*PROBES, "all"],
                        help="the probe whose planted runs to record (default: %(default)s)")
    parser.add_argument("--out", default=None, help="fixture folder of the one --probe named (default: "
                        f"{RECORDED_SEMANTICS} for semantics, {FIXTURES}/<probe> for the others)")
    parser.add_argument("--keep", default=None, help="train in this folder and keep it (default: a temporary one)")
    args = parser.parse_args(argv)
    if args.out and args.probe == "all":
        parser.error("--out needs one --probe")
    scratch = Path(args.keep or tempfile.mkdtemp(prefix="evalkit-record-"))
    scratch.mkdir(parents=True, exist_ok=True)
    try:
        for dim in PROBES if args.probe == "all" else (args.probe,):
            start = time.monotonic()
            default = RECORDED_SEMANTICS if dim == "semantics" else FIXTURES / dim
            out = Path(args.out or default)
            out.mkdir(parents=True, exist_ok=True)
            written = record_semantics(scratch, out) if dim == "semantics" else record_probe(dim, scratch, out)
            size = sum(p.stat().st_size for p in out.glob("*.json.gz"))
            print(f"record: {dim}: {len(written)} recordings ({size / 1024:.0f} KiB) in {out} "
                  f"({time.monotonic() - start:.0f} s): {', '.join(written)}", file=sys.stderr, flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
