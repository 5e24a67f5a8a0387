"""The performance probe's table in docs/probes/performance.md, regenerated from a stored evaluation: one row per
wrapper and mode that the performance probe judged (the newest probe run of each, its stored evidence judged again by
the current judge), with the added time at a 100 ms step and its interval, the fit, the rounds and blocks it took,
the training memory and, where the cell is not a pass, the function its profile names first.

    python scripts/performance_table.py --tracking-uri sqlite:///path/to/mlflow.db [--write docs/probes/performance.md]

Without --write the table is printed; with it, the part of the file between the markers
`<!-- performance-table -->` and `<!-- /performance-table -->` is replaced.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile

from evalkit import names

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
START, END = "<!-- performance-table -->", "<!-- /performance-table -->"


def newest_results(uri: str, experiment: str) -> list[tuple[dict, dict]]:
    """(tags, result) of the newest performance probe run of each trainer and mode."""
    from mlflow.tracking import MlflowClient

    from evalkit.probes.evidence import load_fixture
    from evalkit.probes.performance.judge import judge

    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        sys.exit(f"no experiment {experiment!r} in {uri}: run evalkit-eval first")
    runs = client.search_runs([exp.experiment_id], f"tags.`{names.ROLE}` = '{names.ROLE_PROBE}' and "
                              f"tags.`{names.PROBE}` = 'performance'", order_by=["attributes.start_time DESC"])
    seen, out = set(), []
    with tempfile.TemporaryDirectory() as tmp:
        for run in runs:
            key = (run.data.tags.get(names.TRAINER), run.data.tags.get(names.MODE))
            if key in seen or run.info.status != "FINISHED":
                continue
            seen.add(key)
            evidence = client.download_artifacts(
                run.info.run_id, f"{names.PROBE_ARTIFACT_DIR}/{names.probe_evidence_file('performance')}", tmp)
            out.append((run.data.tags, json.loads(judge(load_fixture(evidence)).to_json())))
    return sorted(out, key=lambda tr: (tr[0].get(names.TRAINER, ""), tr[0].get(names.MODE, "")))


def first_function(result: dict) -> str:
    section = next((s for s in result.get("sections", []) if s.startswith("## Where the added time goes")), "")
    found = re.search(r"^\| `([^`]+)` \| ([+-][0-9.]+) \|", section, re.M)
    return f"`{found.group(1)}` {found.group(2)} ms" if found else "-"


def row(tags: dict, result: dict) -> str:
    f = result.get("figures", {})
    status = "inconclusive" if result.get("inconclusive") else "pass" if result.get("passed") else "fail"
    sizes = sorted({k.split("/")[0] for k in f if re.match(r"d\d+/", k)}, key=lambda k: int(k[1:]))
    if "added_fraction" not in f:
        return f"| {tags.get(names.TRAINER)} | {tags.get(names.MODE)} | {status} | - | - | - | - | - |"
    frac = (f"{100 * f['added_fraction']:+.1f} % [{100 * f['added_fraction_low']:+.1f}, "
            f"{100 * f['added_fraction_high']:+.1f}]")
    fit = (f"{f['added_ms_per_step']:+.2f} ms + {100 * f['added_proportional']:+.1f} %"
           if "added_ms_per_step" in f else "-")
    rounds = int(f.get("rounds", 0))
    largest = sizes[-1] if sizes else None
    memory = (f"{f[f'{largest}/train_mib/wrapper'] - f[f'{largest}/train_mib/baseline']:+.1f} MiB @{largest}"
              if largest and f"{largest}/train_mib/wrapper" in f else "-")
    return (f"| {tags.get(names.TRAINER)} | {tags.get(names.MODE)} | {status} | {frac} | {fit} | "
            f"{rounds} ({2 * len(sizes) * rounds}) | {memory} | {first_function(result)} |")


def table(results: list[tuple[dict, dict]]) -> str:
    lines = ["| trainer | mode | cell | added at a 100 ms step [99.17 % interval] | fixed + proportional per step | "
             "rounds (blocks) | training memory | profile: first function (added ms/step, profiled) |",
             "|---|---|---|---|---|---|---|---|"]
    return "\n".join(lines + [row(t, r) for t, r in results])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tracking-uri", required=True)
    parser.add_argument("--experiment", default="evalkit")
    parser.add_argument("--write", help="a file with the markers to replace the table in "
                                        "(e.g. docs/probes/performance.md)")
    args = parser.parse_args()
    text = table(newest_results(args.tracking_uri, args.experiment))
    if not args.write:
        print(text)
        return
    with open(args.write) as fh:
        doc = fh.read()
    if START not in doc or END not in doc:
        sys.exit(f"{args.write} has no {START} ... {END} markers: add them where the table goes")
    head, rest = doc.split(START, 1)
    _, tail = rest.split(END, 1)
    with open(args.write, "w") as fh:
        fh.write(f"{head}{START}\n{text}\n{END}{tail}")
    print(f"{args.write}: performance table written ({text.count(chr(10)) - 1} rows)")


if __name__ == "__main__":
    main()
