"""What a CI system reads of a verdict (issue 45): junit.xml, read back by a JUnit parser (junitparser, as CI
systems' reporters do), has one test case per wrapper arm and dimension with fail cells as failures carrying their
reasons; summary.md says whether the gate passed and why each fail. Built from synthetic records, no process."""
from __future__ import annotations

from junitparser import Failure, JUnitXml, Skipped

from evalkit.analysis.synthetic import ArmPlan, records
from evalkit.probes.catalog import dimension_names
from evalkit.verdict import VerdictOptions, build_verdict
from evalkit.verdict.ci_report import junit_xml, markdown_summary
from evalkit.verdict.cli import gate

FRAGILE = {"customization": 1.0, "stability": 0.0, "maintenance": 1.0}


def _verdict():
    return build_verdict(records([ArmPlan("baseline"), ArmPlan("fragile", probes=FRAGILE), ArmPlan("plain")]),
                         VerdictOptions())


def test_a_junit_parser_reads_one_case_per_arm_and_dimension_fails_as_failures(tmp_path):
    verdict = _verdict()
    path = tmp_path / "junit.xml"
    path.write_text(junit_xml(verdict, set()))
    suite = next(iter(JUnitXml.fromfile(str(path))))
    cases = {(c.classname, c.name): c for c in suite}
    assert len(cases) == len(verdict.rows) * len(dimension_names()) == suite.tests
    fragile = [r for r in verdict.rows if r.key.trainer == "fragile"][0]
    stability = cases[(f"evalkit.fragile.{fragile.key.mode}.{fragile.key.task}", "stability")]
    (failure,) = stability.result
    assert isinstance(failure, Failure) and failure.message.startswith("fail")
    assert "stability probe failed" in failure.text
    not_run = cases[(f"evalkit.fragile.{fragile.key.mode}.{fragile.key.task}", "semantics")]
    assert isinstance(not_run.result[0], Skipped) and not_run.result[0].message == "not run"
    assert suite.failures == sum(r.dimensions[d].status == "fail" for r in verdict.rows for d in dimension_names())


def test_gated_words_turn_not_run_cells_into_failures(tmp_path):
    verdict = _verdict()
    path = tmp_path / "junit.xml"
    path.write_text(junit_xml(verdict, {"not run", "inconclusive"}))
    suite = next(iter(JUnitXml.fromfile(str(path))))
    assert suite.skipped == 0
    assert suite.failures == sum(r.dimensions[d].status != "pass" for r in verdict.rows for d in dimension_names())


def test_the_summary_says_whether_the_gate_passed_and_why_each_fail():
    verdict = _verdict()
    failures = gate(verdict, ["stability"], [])
    text = markdown_summary(verdict, failures, ["stability"], "verdict/verdict.html")
    assert text.startswith("# evalkit verdict\n\n**CI gate failed** (`--fail-on stability`): `fragile/")
    assert "| fragile |" in text and "**fail**" in text
    assert "- fragile/" in text and "stability: " in text and text.rstrip().endswith("`verdict/verdict.html`.")
    passed = markdown_summary(verdict, gate(verdict, ["customization"], ["plain"]), ["customization"], None)
    assert "CI gate passed (`--fail-on customization`)." in passed
