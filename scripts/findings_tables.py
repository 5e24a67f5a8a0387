"""docs/findings.md from a stored evaluation (evalkit/verdict/findings_doc.py says what it holds).

    evalkit-eval                                                          # the evaluation, into ./mlflow.db
    python scripts/findings_tables.py snapshot --tracking-uri sqlite:///mlflow.db   # docs/findings/evaluation.json
    python scripts/findings_tables.py render                              # docs/findings.md from the snapshot
    python scripts/findings_tables.py check                               # exit 1 when the two disagree

Exit codes: 0 done, 1 the document is not the snapshot's rendering (check), 2 bad input (one message).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
from pathlib import Path

from evalkit.verdict.findings_doc import render, take_snapshot

REPO = Path(__file__).resolve().parent.parent
SNAPSHOT, DOC = REPO / "docs" / "findings" / "evaluation.json", REPO / "docs" / "findings.md"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("snapshot", "render", "check"))
    parser.add_argument("--tracking-uri", default=os.environ.get("MLFLOW_TRACKING_URI", "sqlite:///mlflow.db"))
    parser.add_argument("--experiment", default="evalkit")
    parser.add_argument("--snapshot", type=Path, default=SNAPSHOT)
    parser.add_argument("--doc", type=Path, default=DOC)
    args = parser.parse_args(argv)
    try:
        if args.action == "snapshot":
            from mlflow.tracking import MlflowClient

            os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
            data = take_snapshot(MlflowClient(args.tracking_uri), args.experiment,
                                 datetime.date.today().isoformat())
            args.snapshot.parent.mkdir(parents=True, exist_ok=True)
            args.snapshot.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
            print(f"{len(data['probes'])} probe runs and {len(data['verdict'])} verdict rows -> {args.snapshot}")
            return 0
        text = render(json.loads(args.snapshot.read_text()))
    except (OSError, ValueError, KeyError) as exc:
        print(f"findings_tables: {args.action}: {exc}", file=sys.stderr)
        return 2
    if args.action == "render":
        args.doc.write_text(text)
        print(f"-> {args.doc}")
        return 0
    if not args.doc.exists() or args.doc.read_text() != text:
        print(f"{args.doc} is not the rendering of {args.snapshot}: run `python scripts/findings_tables.py render`",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
