"""What a CI system reads of a verdict, written beside the report: `junit.xml`, one test case per wrapper arm and
dimension (a fail cell is a failure carrying its reasons, an inconclusive or not-run cell is skipped with its
figure, or a failure where `--fail-on` gates those words), and `summary.md`, the gate's outcome, the table and
the reasons of every cell that failed, for a CI job's summary page (GitHub's $GITHUB_STEP_SUMMARY, a GitLab
artifact)."""
from __future__ import annotations

from xml.etree import ElementTree

from evalkit.probes.catalog import dimension_names
from evalkit.text import one_line
from evalkit.verdict.build import Row, Verdict
from evalkit.verdict.dimensions import FAIL, PASS

JUNIT_FILE, SUMMARY_FILE = "junit.xml", "summary.md"


def case_name(row: Row) -> str:
    """A test case's class name: evalkit.<trainer>.<mode>.<task>, dots only (a JUnit reader's package path)."""
    return ".".join(["evalkit", row.key.trainer, row.key.mode, row.key.task])


def junit_xml(verdict: Verdict, gated_statuses: set[str]) -> str:
    """The verdict as JUnit XML. `gated_statuses`: the cell statuses --fail-on makes failures besides fail
    (inconclusive, not run)."""
    suite = ElementTree.Element("testsuite", name="evalkit verdict")
    counts = {"tests": 0, "failures": 0, "skipped": 0}
    for row in verdict.rows:
        for dim in dimension_names():
            cell = row.dimensions[dim]
            case = ElementTree.SubElement(suite, "testcase", classname=case_name(row), name=dim)
            ElementTree.SubElement(case, "system-out").text = f"[{row.key.caliber}] {cell.cell()}"
            counts["tests"] += 1
            if cell.status == FAIL or cell.status in gated_statuses:
                failure = ElementTree.SubElement(case, "failure", message=cell.cell()[:1000], type=cell.status)
                failure.text = "\n".join(cell.reasons) or cell.cell()
                counts["failures"] += 1
            elif cell.status != PASS:
                ElementTree.SubElement(case, "skipped", message=cell.cell()[:1000])
                counts["skipped"] += 1
    suite.attrib.update({k: str(v) for k, v in counts.items()})
    ElementTree.indent(suite)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ElementTree.tostring(suite, encoding="unicode") + "\n"


def markdown_summary(verdict: Verdict, gate_failures: list[str], fail_on: list[str], report: str | None) -> str:
    """The summary page: the gate's outcome, one row per arm, and the first reason of every fail cell."""
    if not fail_on:
        gate = "No CI gate (`--fail-on` not given)."
    elif gate_failures:
        gate = (f"**CI gate failed** (`--fail-on {','.join(fail_on)}`): "
                + "; ".join(f"`{f}`" for f in gate_failures) + ".")
    else:
        gate = f"CI gate passed (`--fail-on {','.join(fail_on)}`)."
    lines = ["# evalkit verdict", "", gate, "", "| trainer | mode | task | " + " | ".join(dimension_names()) + " |",
             "|---|---|---|" + "---|" * len(dimension_names())]
    for row in verdict.rows:
        cells = [("**fail**" if row.dimensions[d].status == FAIL else row.dimensions[d].status)
                 for d in dimension_names()]
        lines.append(f"| {row.key.trainer} | {row.key.mode} | {row.key.task} | " + " | ".join(cells) + " |")
    failed = [(row, d) for row in verdict.rows for d in dimension_names() if row.dimensions[d].status == FAIL]
    if failed:
        lines += ["", "## Why each fail", ""]
        for row, d in failed:
            cell = row.dimensions[d]
            why = cell.reasons[0] if cell.reasons else cell.figure
            lines.append(f"- {row.key.trainer}/{row.key.mode} {d}: {one_line(why, 400)}")
    if report:
        lines += ["", f"The full report: `{report}`."]
    return "\n".join(lines) + "\n"


