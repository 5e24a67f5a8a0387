"""Tabulate every evalkit job recorded under a folder of local stores (`*/mlflow.db`, e.g. pytest's
--basetemp after tests/e2e/test_cuda.py): trainer, precision requested/observed, status, throughput, memory.

    python scripts/cuda_summary.py /tmp/cuda_check [--json out.json]
"""
from __future__ import annotations

import argparse
import glob
import json
import os

os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

from mlflow.tracking import MlflowClient  # noqa: E402

from evalkit import names  # noqa: E402


def job_rows(root: str) -> list[dict]:
    rows = []
    stores = {os.path.realpath(db) for db in glob.glob(os.path.join(root, "**", "mlflow.db"), recursive=True)}
    for db in sorted(stores):   # realpath: pytest's basetemp links "<name>current" to a test's folder
        client = MlflowClient(f"sqlite:///{os.path.abspath(db)}")
        for exp in client.search_experiments():
            for run in client.search_runs([exp.experiment_id], max_results=1000):
                tags, metrics = run.data.tags, run.data.metrics
                if tags.get(names.ROLE) != names.ROLE_JOB:
                    continue
                rows.append({
                    "store": db, "trainer": tags.get(names.TRAINER),
                    "mode": tags.get(names.MODE), "hardware": tags.get(names.HARDWARE),
                    "world_size": tags.get(names.WORLD_SIZE), "requested": tags.get(names.PRECISION),
                    "observed": tags.get(names.OBSERVED_PRECISION), "status": run.info.status,
                    "failure": tags.get(names.FAILURE_REASON),
                    "samples_per_s": metrics.get(names.PERF_SAMPLES_PER_S),
                    "peak_mem_bytes": metrics.get(names.PERF_PEAK_MEM),
                    "loss_scale": metrics.get(names.TRAIN_LOSS_SCALE), "last_loss": metrics.get(names.TRAIN_LOSS),
                    "nvml_used_bytes": _nvml(client, run.info.run_id),
                })
    return rows


def _nvml(client: MlflowClient, run_id: str):
    try:
        path = client.download_artifacts(run_id, f"{names.SPOOL_ARTIFACT_DIR}/{names.summary_file(0)}")
    except Exception:  # noqa: BLE001 - a failed run has no summary
        return None
    with open(path) as fh:
        summary = json.load(fh)
    return summary.get("nvml_used_bytes", summary.get("nvml_error"))


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "-" if value is None else str(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    rows = job_rows(args.root)
    cols = ["trainer", "mode", "hardware", "world_size", "requested", "observed", "status", "samples_per_s",
            "peak_mem_bytes", "nvml_used_bytes", "loss_scale", "last_loss", "failure"]
    print("\t".join(cols))
    for row in sorted(rows, key=lambda r: (r["trainer"] or "", r["requested"] or "", r["world_size"] or "")):
        print("\t".join(_fmt(row[c]) for c in cols))
    print(f"{len(rows)} job runs, {sum(r['status'] == 'FINISHED' for r in rows)} FINISHED")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
