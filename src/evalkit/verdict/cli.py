"""`evalkit-verdict`: judge every wrapper arm of an experiment against its baseline arm.

    evalkit-verdict --tracking-uri sqlite:///mlflow.db --experiment evalkit --sweep-id S \\
        --out verdict/ --scenario platform --fail-on functional,consistency --wrappers lightning

Prints the per-dimension table, the scenario ranking and the reason for every fail; writes the
report (markdown, self-contained HTML, JSON) to --out and logs it as a new `evalkit.role=verdict`
run of the same experiment. When the store fails while the verdict run is recorded, the report is kept on
disk with what the run records, and `evalkit-verdict --record DIR` records it once the store answers again.
`--fail-on` names dimensions, and optionally the words `inconclusive` and `not-run`: a gated dimension fails the
gate when its cell is fail, and also when it is inconclusive or not run if those words are given (only words and
no dimension: all seven), e.g. `--fail-on inconclusive,not-run` for CI that wants everything judged.
Exit codes: 0 ok, 2 bad input (one message), 3 a --fail-on dimension failed for a gated wrapper, 4 the
verdict is printed but could not be recorded (the message names the folder that keeps it). With --out, a JUnit
XML file and a Markdown summary for CI are written beside the report (evalkit/verdict/ci_report.py).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from evalkit.controller.writable import write_problem

EXIT_OK, EXIT_BAD_INPUT, EXIT_GATE, EXIT_UNRECORDED = 0, 2, 3, 4
GATE_WORDS = {"inconclusive": "inconclusive", "not-run": "not run"}   # --fail-on word -> the cell's status
EXIT_CODES = """exit codes:
  0  the verdict is printed, recorded, and no --fail-on cell failed
  2  bad input (one line names it and the fix)
  3  a --fail-on dimension failed (or was inconclusive / not run, when those words are given) for a gated wrapper
  4  the verdict is printed but could not be recorded (the message names the folder that keeps it)
With --out, junit.xml (one test case per wrapper and dimension) and summary.md are written beside the report."""


class BadInput(Exception):
    pass


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="evalkit-verdict", description=__doc__.split("\n\n")[0], epilog=EXIT_CODES,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tracking-uri",
                   help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI or sqlite:///<cwd>/mlflow.db)")
    p.add_argument("--experiment", default="evalkit", help="experiment name (default: evalkit)")
    p.add_argument("--sweep-id", help="only runs tagged evalkit.sweep_id = this")
    p.add_argument("--parent-run-id", help="only child runs of this sweep parent run")
    p.add_argument("--out", type=Path, help="also write verdict.md, verdict.html, verdict.json, plots/ here")
    p.add_argument("--scenario", default="balanced",
                   help="weights of the overall ranking: balanced, research, platform, or one from --scenarios-file")
    p.add_argument("--scenarios-file", type=Path, help="YAML/JSON: scenario -> {dimension: weight}")
    p.add_argument("--fail-on", default=None, metavar="DIM[,DIM][,inconclusive][,not-run]",
                   help="exit 3 when one of these dimensions fails; add inconclusive and/or not-run to fail on "
                        "those outcomes too (words alone gate every dimension)")
    p.add_argument("--wrappers", default="", metavar="A[,B]",
                   help="gate only these wrappers (trainer or trainer/mode)")
    p.add_argument("--reference", action="append", default=[], metavar="TRAINER[@ENV]",
                   help="the version other versions of a wrapper are set against in 'What changed between versions' "
                        "(e.g. hf_trainer@transformers-4.45.2; default: the version installed beside evalkit)")
    p.add_argument("--alpha", type=float, default=0.05, help="family-wise error rate (Holm) (default: 0.05)")
    p.add_argument("--margin", action="append", default=[], metavar="[TASK:]METRIC=REL",
                   help="equivalence margin override, e.g. mse=0.02 (±2 %% on a relative metric) or "
                        "accuracy=0.005 (±0.005 on an absolute one) or tiny_lm:perplexity=0.005 (repeatable)")
    p.add_argument("--throughput-min", type=float, default=0.9, help="budget: wrapper/baseline throughput >= this")
    p.add_argument("--memory-max", type=float, default=1.1, help="budget: wrapper/baseline peak memory <= this")
    p.add_argument("--min-seeds", type=int, default=3, help="warn below this many seeds per arm")
    p.add_argument("--workers", type=int, default=8, help="parallel artifact readers")
    p.add_argument("--no-log", action="store_true", help="do not create the MLflow verdict run")
    p.add_argument("--no-plots", action="store_true", help="report without plots (faster)")
    p.add_argument("--record", type=Path, metavar="DIR",
                   help="record the verdict kept in DIR when the store failed (nothing is read or judged again)")
    return p


def _split(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _margins(items: list[str]) -> dict[str, float]:
    from evalkit.analysis.stats import MARGIN_RULE, check_margin

    out = {}
    for item in items:
        key, _, value = item.partition("=")
        try:
            out[key.strip().removeprefix("val/")] = float(value)
        except ValueError:
            raise BadInput(f"--margin {item!r}: expected [TASK:]METRIC=REL, e.g. mse=0.02") from None
        try:
            check_margin(out[key.strip().removeprefix("val/")])
        except ValueError:
            raise BadInput(f"--margin {item!r}: {MARGIN_RULE}") from None
        if not key.strip():
            raise BadInput(f"--margin {item!r}: expected [TASK:]METRIC=REL, e.g. mse=0.02")
    return out


def options_from(args):
    from evalkit.verdict.build import VerdictOptions
    from evalkit.verdict.scenarios import ScenarioError, load_scenarios

    problem = fail_on_problem(args.fail_on)
    if problem:
        raise BadInput(problem)
    if not 0 < args.alpha < 0.5:
        raise BadInput(f"--alpha must lie in (0, 0.5), got {args.alpha}")
    try:
        scenarios = load_scenarios(args.scenarios_file)
    except (ScenarioError, ValueError) as exc:
        raise BadInput(str(exc)) from None
    if args.scenario not in scenarios:
        raise BadInput(f"--scenario {args.scenario!r} unknown; choose from {', '.join(sorted(scenarios))}")
    return VerdictOptions(alpha=args.alpha, margins=_margins(args.margin), throughput_min=args.throughput_min,
                          memory_max=args.memory_max, min_seeds=args.min_seeds, scenario=args.scenario,
                          scenarios=scenarios, references=list(args.reference))


def fail_on_problem(text: str | None) -> str | None:
    """What is wrong with a --fail-on value (evalkit-eval checks it before training), or None."""
    from evalkit.probes.catalog import dimension_names

    if text is not None and not _split(text):
        return (f"--fail-on: empty ({text!r}) would gate nothing; name dimensions ({', '.join(dimension_names())}) "
                f"and/or {' and '.join(GATE_WORDS)}, or leave the flag out")
    unknown = set(_split(text or "")) - set(dimension_names()) - set(GATE_WORDS)
    if unknown:
        return (f"--fail-on: unknown dimension(s) {sorted(unknown)}; choose from {', '.join(dimension_names())}, and "
                f"optionally {' and '.join(GATE_WORDS)}")
    return None


def write_ci_files(folder: Path | None, verdict, failures: list[str], fail_on: list[str]) -> None:
    """junit.xml and summary.md beside the report; the summary also onto a GitHub job's summary page."""
    import os

    from evalkit.verdict.ci_report import JUNIT_FILE, SUMMARY_FILE, junit_xml, markdown_summary

    report = str(folder / "verdict.html") if folder else None
    summary = markdown_summary(verdict, failures, fail_on, report)
    if folder:
        (folder / JUNIT_FILE).write_text(junit_xml(verdict, {GATE_WORDS[w] for w in fail_on if w in GATE_WORDS}),
                                         encoding="utf-8")
        (folder / SUMMARY_FILE).write_text(summary, encoding="utf-8")
        print(f"CI files written: {folder / JUNIT_FILE}, {folder / SUMMARY_FILE}", file=sys.stderr)
    page = os.environ.get("GITHUB_STEP_SUMMARY")
    if page:
        with open(page, "a", encoding="utf-8") as fh:
            fh.write(summary)


def gate(verdict, fail_on: list[str], wrappers: list[str]) -> list[str]:
    """Failures that make the exit code 3: '<arm>: <dimension> (<status>)' for gated wrappers and dimensions; a
    cell fails the gate when it is fail, or inconclusive / not run when --fail-on names those words."""
    from evalkit.probes.catalog import dimension_names
    from evalkit.verdict.build import row_label
    from evalkit.verdict.dimensions import FAIL

    names = {r.key.trainer for r in verdict.rows} | {r.key.label for r in verdict.rows}
    missing = [w for w in wrappers if w not in names]
    if missing:
        raise BadInput(f"--wrappers: no arm for {missing}; present: {', '.join(sorted(names))}")
    statuses = {FAIL} | {GATE_WORDS[w] for w in fail_on if w in GATE_WORDS}
    dims = [d for d in fail_on if d in dimension_names()] or (list(dimension_names()) if len(statuses) > 1 else [])
    chosen = [r for r in verdict.rows if not wrappers or r.key.trainer in wrappers or r.key.label in wrappers]
    unjudged = sorted({d for r in chosen for d in dims
                       if r.dimensions[d].status in set(GATE_WORDS.values()) - statuses})
    if unjudged:
        print(f"note: --fail-on {', '.join(unjudged)}: not run or inconclusive for some gated arms; that does not "
              "fail the gate (add inconclusive,not-run to --fail-on for it to)", file=sys.stderr)
    return [f"{row_label(r.key)}: {d} ({r.dimensions[d].status})" for r in chosen for d in dims
            if r.dimensions[d].status in statuses]


def run(args) -> int:
    from evalkit.analysis.store import default_tracking_uri, read_runs
    from evalkit.controller.tracking import display_uri
    from evalkit.verdict.build import build_verdict
    from evalkit.verdict.table import terminal_report
    from evalkit.verdict.versions import check_references

    options = options_from(args)
    out_problem = write_problem(str(args.out)) if args.out else None
    if out_problem:   # before reading any run: that can take minutes
        raise BadInput(f"--out {args.out}: cannot write the report there ({out_problem}): choose a writable folder")
    uri = args.tracking_uri or default_tracking_uri()
    started = time.perf_counter()
    client, exp_id, records = read_runs(uri, args.experiment, args.sweep_id, args.parent_run_id, args.workers)
    read_s = time.perf_counter() - started
    verdict = build_verdict(records, options)
    unknown = check_references(options.references, verdict.arms)
    if unknown:
        raise BadInput("; ".join(unknown))
    failures = gate(verdict, _split(args.fail_on or ""), _split(args.wrappers))
    print(terminal_report(verdict))
    print(f"\n[{len(records)} runs read in {read_s:.1f} s, verdict in {time.perf_counter() - started - read_s:.1f} s]",
          file=sys.stderr)
    inputs = {"tracking_uri": display_uri(uri), "experiment": args.experiment, "sweep_id": args.sweep_id,
              "parent_run_id": args.parent_run_id, "runs": len(records), "alpha": options.alpha}
    if args.out or not args.no_log:
        from evalkit.verdict.publish import render_report, verdict_record  # matplotlib: only when needed

        files = render_report(verdict, inputs, with_plots=not args.no_plots)
        if args.out:
            files.write(args.out)
            print(f"report written to {args.out}/verdict.html", file=sys.stderr)
    write_ci_files(args.out, verdict, failures, _split(args.fail_on or ""))
    if not args.no_log and not publish(client, uri, verdict_record(verdict, inputs, exp_id), files, args):
        return EXIT_UNRECORDED
    if failures:
        print("\nCI gate failed (--fail-on):\n" + "\n".join(f"  - {f}" for f in failures), file=sys.stderr)
        return EXIT_GATE
    return EXIT_OK


def publish(client, uri: str, record, files, args) -> bool:
    """Record the verdict run; when the store fails, keep the report and the record on disk, say how to record
    them later, and return False."""
    import tempfile

    from evalkit.controller.tracking import describe_failure, display_uri
    from evalkit.verdict.publish import keep_unrecorded, log_verdict_run

    try:
        with tempfile.TemporaryDirectory(prefix="evalkit-verdict-") as tmp:
            files.write(Path(tmp))
            run_id = log_verdict_run(client, record, Path(tmp))
    except Exception as exc:  # noqa: BLE001 - any store failure means the same: keep it, record it later
        kept = keep_unrecorded(record, files, args.out)
        again = f" --tracking-uri {display_uri(args.tracking_uri)}" if args.tracking_uri else ""
        print(f"evalkit-verdict: the tracking store {display_uri(uri)} failed while recording the verdict run "
              f"({describe_failure(exc)}); the verdict is printed above and kept in {kept}: when the store answers "
              f"again, run: evalkit-verdict --record {kept}{again}", file=sys.stderr)
        return False
    say_recorded(uri, record.experiment_id, run_id)
    return True


def say_recorded(uri: str, experiment_id: str, run_id: str) -> None:
    from evalkit.controller.ui import open_hint

    print(f"verdict logged as MLflow run {run_id}", file=sys.stderr)
    print(open_hint("the verdict (report under its artifacts, verdict/verdict.html)", uri, experiment_id, run_id),
          file=sys.stderr)


def record(args) -> int:
    """`--record DIR`: the verdict a failed store left in DIR, recorded now."""
    from evalkit.analysis.store import connect, default_tracking_uri
    from evalkit.verdict.publish import record_kept

    uri = args.tracking_uri or default_tracking_uri()
    client = connect(uri)
    try:
        run_id, kept = record_kept(client, args.record)
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - the store still fails: nothing lost, try again later
        from evalkit.controller.tracking import describe_failure, display_uri

        print(f"evalkit-verdict: the tracking store {display_uri(uri)} still fails ({describe_failure(exc)}): the "
              f"verdict stays in {args.record}; run this again when the store answers", file=sys.stderr)
        return EXIT_UNRECORDED
    say_recorded(uri, kept.experiment_id, run_id)
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    import os

    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # one bar per run otherwise
    from evalkit.analysis.store import StoreError

    try:
        args = parser().parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2), as a return code for callers
        return int(exc.code or 0)
    from evalkit.controller.launch_dir import cwd_problem

    if cwd_problem():
        print(f"evalkit-verdict: error: {cwd_problem()}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        return record(args) if args.record else run(args)
    except (BadInput, StoreError) as exc:
        from evalkit.controller.tracking import display_uri

        print(f"evalkit-verdict: error: {display_uri(exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT


def split_mlflow_args(argv: list[str]) -> list[str]:
    """`mlflow run -e <entry> -P args="--a 1 --b"` passes its arguments as ONE (MLproject): split it as a shell
    would; arguments given one by one are kept as they are."""
    import shlex

    if len(argv) == 1:
        return shlex.split(argv[0])
    return argv


if __name__ == "__main__":
    sys.exit(main(split_mlflow_args(sys.argv[1:])))
