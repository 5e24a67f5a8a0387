"""The README's table of what each wrapper's `defaults` mode does differently from the baseline, from the
semantic probe runs in a store (every finding in words, the first step, the setting that aligns it).

    python scripts/semantics_table.py --tracking-uri sqlite:///mlflow.db [--mode defaults] [--rejudge]

`--rejudge` judges each probe run's stored evidence again with the installed judge (no training).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

from evalkit import names
from evalkit.probes.evidence import load_fixture
from evalkit.probes.findings import ProbeResult
from evalkit.probes.registry import load_probe


def results(client, mode: str, rejudge: bool) -> list[tuple[str, str, ProbeResult]]:
    """(trainer, wrapper version, result) of the newest finished semantics probe run per trainer in `mode`."""
    exp = [e.experiment_id for e in client.search_experiments()]
    query = (f"tags.`{names.ROLE}` = '{names.ROLE_PROBE}' and tags.`{names.PROBE}` = 'semantics' "
             f"and tags.`{names.MODE}` = '{mode}' and attributes.status = 'FINISHED'")
    newest: dict[str, object] = {}
    for run in client.search_runs(exp, query, order_by=["attributes.start_time DESC"], max_results=1000):
        newest.setdefault(run.data.tags[names.TRAINER], run)
    out = []
    probe = load_probe("semantics")
    with tempfile.TemporaryDirectory() as tmp:
        for trainer, run in sorted(newest.items()):
            if rejudge:
                path = client.download_artifacts(run.info.run_id, "probe/semantics_evidence.json", tmp)
                result = probe.judge(load_fixture(path))
            else:
                with open(client.download_artifacts(run.info.run_id, "probe/semantics.json", tmp)) as fh:
                    result = ProbeResult.from_json(fh.read())
            out.append((trainer, run.data.tags.get(names.WRAPPER_VERSION, "?"), result))
    return out


def table(rows: list[tuple[str, str, ProbeResult]], aligned: dict[str, ProbeResult] | None = None) -> str:
    """Markdown rows per finding; with the aligned results of the same store, a setting is marked verified
    where the wrapper's aligned mode shows no finding of that kind."""
    lines = ["| wrapper (version) | what differs from the baseline | why (what reproduces it) | first step (jobs) "
             "| setting that aligns it |", "|---|---|---|---|---|"]
    for trainer, version, result in rows:
        if not result.findings:
            lines.append(f"| {trainer} ({version}) | nothing: every step as the oracle's | | | |")
        for i, f in enumerate(result.findings):
            why = f.explained_by[0] if f.explained_by else f"unexplained ({f.size})"
            head = f"{trainer} ({version})" if i == 0 else ""
            knob = f.knob
            if knob and aligned and trainer in aligned and f.code not in {a.code for a in aligned[trainer].findings}:
                knob += " (verified: aligned mode shows none)"
            cells = [head, f"`{f.code}` {f.title}", "" if why == f.title else why, f"{f.first_step} ({f.job})", knob]
            lines.append("| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tracking-uri", default=os.environ.get("MLFLOW_TRACKING_URI", "sqlite:///mlflow.db"))
    parser.add_argument("--mode", default="defaults", choices=("aligned", "defaults"))
    parser.add_argument("--rejudge", action="store_true", help="judge the stored evidence again")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    from mlflow.tracking import MlflowClient

    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    client = MlflowClient(args.tracking_uri)
    rows = results(client, args.mode, args.rejudge)
    aligned = {t: r for t, _, r in results(client, "aligned", args.rejudge)} if args.mode == "defaults" else None
    if not rows:
        print(f"no finished semantics probe run in {args.mode} mode at {args.tracking_uri}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({t: json.loads(r.to_json()) for t, _, r in rows}, indent=1))
    else:
        print(table(rows, aligned))
    return 0


if __name__ == "__main__":
    sys.exit(main())
