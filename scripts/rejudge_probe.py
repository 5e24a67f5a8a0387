"""Judge a probe run again from the evidence it stored, without training: prints the result as markdown.

    python scripts/rejudge_probe.py --tracking-uri sqlite:///mlflow.db <probe run id> [--json]

The probe run's `probe/<dim>_evidence.json` holds its jobs' records as the judge read them; a changed judge
(or a reader who wants the findings again) gets the same input. Nothing is written to the store.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

from evalkit import names
from evalkit.probes.catalog import load_probe
from evalkit.probes.evidence import load_fixture


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_id")
    parser.add_argument("--tracking-uri", default=os.environ.get("MLFLOW_TRACKING_URI", "sqlite:///mlflow.db"))
    parser.add_argument("--json", action="store_true", help="print the result as JSON instead of markdown")
    args = parser.parse_args(argv)
    from mlflow.tracking import MlflowClient

    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    client = MlflowClient(args.tracking_uri)
    run = client.get_run(args.run_id)
    name = run.data.tags.get(names.PROBE)
    if not name:
        print(f"run {args.run_id} is not a probe run (no {names.PROBE} tag)", file=sys.stderr)
        return 2
    probe = load_probe(name)
    with tempfile.TemporaryDirectory() as tmp:
        path = client.download_artifacts(
            args.run_id, f"{names.PROBE_ARTIFACT_DIR}/{names.probe_evidence_file(probe.dimension)}", tmp)
        jobs = load_fixture(path)
        if callable(getattr(probe, "measure", None)):   # what it measured besides its jobs, stored beside them
            measured = client.download_artifacts(
                args.run_id, f"{names.PROBE_ARTIFACT_DIR}/{names.probe_measured_file(probe.dimension)}", tmp)
            with open(measured) as fh:
                result = probe.judge(jobs, json.load(fh))
        else:
            result = probe.judge(jobs)
    trainer, mode = run.data.tags.get(names.TRAINER), run.data.tags.get(names.MODE)
    print(result.to_json() if args.json else result.to_markdown(f"{name} probe: {trainer}/{mode} (judged again)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
