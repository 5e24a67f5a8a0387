"""A probe is one package plus one YAML (issue 46): scripts/new_probe.py writes a throwaway probe from the template
(docs/probes/template/) into a temporary folder, and with no other edit it is in the probe catalog (its settings
checked, its class loaded, its plan and judge working) and in every place the verdict shows a dimension: the
table, the first screen, its report section, the JSON, the CI summary and JUnit cases, the findings documents, the
scenario weights and the ranking."""
from __future__ import annotations

import json
import shutil
import sys

import pytest
from helpers import REPO

from evalkit import names
from evalkit.analysis.records import RunRecord
from evalkit.analysis.synthetic import ArmPlan, records
from evalkit.probes import catalog
from evalkit.probes.evidence import JobEvidence

sys.path.insert(0, str(REPO / "scripts"))

from new_probe import write_probe  # noqa: E402

NAME = "throwaway"
SAYS = "Survives the throwaway drill"


@pytest.fixture
def throwaway(tmp_path, monkeypatch):
    """The bundled probes' YAMLs and the throwaway's, in a folder of their own that the catalog reads; the
    throwaway's package importable."""
    conf = tmp_path / "conf" / "probe"
    conf.mkdir(parents=True)
    for path in catalog.PROBE_CONF.glob("*.yaml"):
        shutil.copy(path, conf / path.name)
    written = write_probe(NAME, tmp_path / "site" / "throwaway_probe", conf, "throwaway_probe", SAYS)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setattr(catalog, "PROBE_CONF", conf)
    return written


def probe_run(trainer: str, passed: bool) -> RunRecord:
    """The throwaway's probe run as the runner logs one (its judge's result, its pass metric and tags)."""
    probe = catalog.load_probe(NAME)
    job = JobEvidence("plain", "r1", "FINISHED" if passed else "FAILED", {},
                      steps=[{"step": s, "loss": 1.0 / s} for s in range(1, 13)],
                      tags={} if passed else {names.FAILURE_REASON: "planted"})
    result = probe.judge([job])
    tags = {names.ROLE: names.ROLE_PROBE, names.PROBE: NAME, names.TRAINER: trainer, names.MODE: "aligned",
            names.TASK: "mlp_regression", names.CALIBER: f"{NAME}|x", names.probe_status(NAME): result.status,
            names.probe_headline(NAME): result.headline}
    metrics = {names.probe_pass(NAME): float(result.passed)}
    return RunRecord(f"{NAME}-{trainer}", "FINISHED", tags, metrics, probe_results={NAME: json.loads(
        result.to_json())})


def test_the_template_writes_a_package_and_a_yaml_and_refuses_to_overwrite(tmp_path):
    written = write_probe("demo", tmp_path / "pkg", tmp_path / "conf", "demo_pkg", "Demo")
    assert sorted(p.name for p in written) == ["__init__.py", "demo.yaml", "probe.py", "settings.py"]
    with pytest.raises(FileExistsError):
        write_probe("demo", tmp_path / "pkg", tmp_path / "conf", "demo_pkg", "Demo")
    with pytest.raises(ValueError, match="lower-case Python identifier"):
        write_probe("Not-a-name", tmp_path / "x", tmp_path / "conf", "x", "X")


def test_a_new_probe_is_in_the_catalog_with_no_other_edit(throwaway):
    assert NAME in catalog.probe_names()
    assert catalog.dimension_names()[-1] == NAME and catalog.dimension_names("asks")[-1] == NAME
    assert catalog.dimension(NAME).says == SAYS
    assert "steps" in catalog.schemas()[NAME].__dataclass_fields__
    probe = catalog.load_probe(NAME)
    from omegaconf import OmegaConf

    jobs, notes = probe.plan(OmegaConf.create({"probe": {"steps": 12}}), {})
    assert [j.name for j in jobs] == ["plain"] and jobs[0].overrides == {"train.max_steps": 12}


def test_a_new_probe_shows_in_every_place_the_verdict_shows_a_dimension(throwaway):
    from evalkit.verdict import VerdictOptions, build_verdict, load_scenarios, rank
    from evalkit.verdict.ci_report import junit_xml, markdown_summary
    from evalkit.verdict.findings_doc import render, verdict_excerpt, verdict_rows
    from evalkit.verdict.glance import glance
    from evalkit.verdict.publish import render_report
    from evalkit.verdict.serialize import verdict_dict

    runs = records([ArmPlan("baseline", seeds=(0, 1)), ArmPlan("lightning", seeds=(0, 1)),
                    ArmPlan("ignite", seeds=(0, 1))], n_steps=20)
    verdict = build_verdict(runs + [probe_run("lightning", True), probe_run("ignite", False)], VerdictOptions())
    cells = {r.key.trainer: r.dimensions[NAME] for r in verdict.rows}
    assert cells["lightning"].status == "pass" and cells["ignite"].status == "fail"
    report = render_report(verdict, {}, with_plots=False)
    header = next(line for line in report.markdown.splitlines() if line.startswith("| wrapper | mode | runs |"))
    assert header.rstrip(" |").endswith(NAME)                             # the table's last column
    assert "## Throwaway probe: what it checked, per wrapper and mode" in report.markdown     # its section
    assert f"{SAYS}: 12 steps, a finite loss." in report.markdown                             # the first screen
    paragraphs = {e.title: e.paragraph for e in glance(verdict)}
    assert any(f"{SAYS}: 12 steps, a finite loss." in p for p in paragraphs.values())
    data = verdict_dict(verdict, {})
    assert all(NAME in row["dimensions"] for row in data["rows"])
    summary = markdown_summary(verdict, [], [], None)
    assert next(line for line in summary.splitlines() if line.startswith("| trainer |")).endswith(f"| {NAME} |")
    assert f'name="{NAME}"' in junit_xml(verdict, {"fail"})
    weights = load_scenarios()
    assert all(weights[s][NAME] == catalog.dimension(NAME).weight_in(s) for s in weights)
    standings = rank({r.key.trainer: {d: c.status for d, c in r.dimensions.items()} for r in verdict.rows},
                     weights["balanced"])
    assert {s.label: NAME in s.judged for s in standings} == {"lightning": True, "ignite": True}
    snapshot = {"schema": "evalkit.findings/1", "taken": "2026-12-06", "evalkit_commit": "x",
                "verdict": verdict_rows(data), "probes": [{
                    "probe": NAME, "trainer": "lightning", "mode": "aligned", "version": "2.6.6", "torch": "2.13.0",
                    "run_id": "r", "status": "pass", "headline": "12 steps, a finite loss", "reason": "",
                    "figures": {"steps": 12.0}, "findings": []}]}
    document = render(snapshot)
    assert f"| {NAME} |" in document.splitlines()[next(i for i, line in enumerate(document.splitlines())
                                                         if line.startswith("## Every probe")) + 2]
    assert verdict_excerpt(snapshot, "d.md").splitlines()[2].rstrip(" |").endswith(NAME)
