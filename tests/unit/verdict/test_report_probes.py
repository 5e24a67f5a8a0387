"""The semantic probe's findings in the verdict: its cells, the report's "Semantic findings" section (markdown and
HTML), its plot, and probe results read back from a real MLflow store."""
from __future__ import annotations

import html
import json
import os
import re
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

from evalkit import names  # noqa: E402
from evalkit.analysis import store  # noqa: E402
from evalkit.analysis.records import RunRecord  # noqa: E402
from evalkit.analysis.synthetic import ArmPlan, records  # noqa: E402
from evalkit.probes.findings import Finding, ProbeResult  # noqa: E402
from evalkit.verdict import VerdictOptions, build_verdict  # noqa: E402
from evalkit.verdict.probe_plots import probe_plots  # noqa: E402
from evalkit.verdict.publish import render_report  # noqa: E402

TRUTH_CALIBER = "truth|hw=cpu|bs=8|accum=4|prec=fp32|ws=1,2|"
LR_TITLE = "LR stepped per micro-batch, not per optimizer step"
UPDATE_TITLE = "parameter update differs from the oracle's (unexplained)"
KNOB = "trainer.scheduler_interval=step"
NOTE = "ws2-clip not run: ws2 recorded no gradient to choose a clipping norm from"


def failing_result() -> ProbeResult:
    """Two findings, the second unexplained, and series for two jobs (ws1 wrong LR from step 2, ws2 update 3x)."""
    steps = list(range(1, 9))
    expected = [1e-3 * min(s / 4, 1.0) for s in steps]
    observed = [1e-3 * min((2 * s - 1) / 4, 1.0) for s in steps]     # two scheduler steps per optimizer step
    lr = Finding(code="lr.per_micro_batch", title=LR_TITLE, job="ws1", first_step=2, expected=0.0005,
                 observed=0.00075, size="lr 0.00075 vs 0.0005 at step 2; 2 of 8 steps differ",
                 explained_by=["scheduler stepped per micro-batch"], knob=KNOB,
                 declared="scheduler steps every optimizer step")
    update = Finding(code="unexplained.update", title=UPDATE_TITLE, job="ws2", first_step=5, expected=1.0,
                     observed=3.0, size="update 3.00x expected")
    series = {"ws1": {"step": steps, "expected_lr": expected, "observed_lr": observed,
                      "update_scale": [1.0] * 8, "cosine": [1.0] * 8},
              "ws2": {"step": steps, "expected_lr": expected, "observed_lr": expected,
                      "update_scale": [1.0, 1.0, 1.0, 1.0, 3.0, 3.0, None, 3.0], "cosine": [1.0] * 8}}
    return ProbeResult("semantics", False, [lr, update], figures={"findings": 2.0}, notes=[NOTE], series=series)


def passing_result() -> ProbeResult:
    steps = list(range(1, 5))
    return ProbeResult("semantics", True, figures={"findings": 0.0}, notes=["every step matched the oracle"],
                       series={"ws1": {"step": steps, "expected_lr": [1e-3] * 4, "observed_lr": [1e-3] * 4,
                                       "update_scale": [1.0] * 4}})


def probe_record(run_id: str, trainer: str, result: ProbeResult | None, parsed: dict | None = None) -> RunRecord:
    """A probe run as the store reads it back: tags, the metrics the runner logs, the parsed probe/semantics.json."""
    tags = {names.ROLE: names.ROLE_PROBE, names.PROBE: "semantics", names.TRAINER: trainer, names.MODE: "aligned",
            names.TASK: "semantics_truth", names.CALIBER: TRUTH_CALIBER}
    metrics = {}
    if result is not None:
        metrics = {names.probe_pass("semantics"): 1.0 if result.passed else 0.0,
                   "probe/semantics/findings": float(len(result.findings))}
        if result.reason:
            tags[names.probe_reason("semantics")] = result.reason
        parsed = json.loads(result.to_json()) if parsed is None else parsed
    return RunRecord(run_id, "FINISHED", tags, metrics,
                     probe_results={"semantics": parsed} if parsed is not None else {})


def verdict_with(*probes: RunRecord):
    jobs = records([ArmPlan("baseline", seeds=(0, 1, 2)), ArmPlan("lightning", seeds=(0, 1, 2)),
                    ArmPlan("accelerate", seeds=(0, 1, 2))], n_steps=30)
    return build_verdict(jobs + list(probes), VerdictOptions())


def semantics_cell(verdict, trainer: str) -> str:
    return next(r for r in verdict.rows if r.key.trainer == trainer).dimensions["semantics"].cell()


@pytest.fixture(scope="module")
def report():
    verdict = verdict_with(probe_record("probefail0001", "lightning", failing_result()),
                           probe_record("probepass0001", "accelerate", passing_result()))
    return verdict, render_report(verdict, {"experiment": "evalkit"})


def test_semantics_cells_show_pass_or_fail_with_the_number_of_findings(report):
    verdict, _ = report
    assert semantics_cell(verdict, "lightning").startswith(f"fail (2 findings: {LR_TITLE}")
    assert semantics_cell(verdict, "accelerate") == "pass (0 findings)"


def test_markdown_lists_every_finding_with_its_step_explanation_and_knob(report):
    md = report[1].markdown
    section = md[md.index("## Semantic findings"):md.index("## Stability and noise warnings")]
    assert md.index("## Reasons for every fail") < md.index("## Semantic findings")
    assert "### lightning/aligned: fail, 2 findings" in section
    assert "### accelerate/aligned: pass, 0 findings" in section
    rows = [line for line in section.splitlines() if re.match(r"\| [12] \|", line)]
    assert len(rows) == 2, section
    assert rows[0].startswith(f"| 1 | {LR_TITLE} | 2 | ws1 | 0.0005 | 0.00075 |")
    assert "scheduler stepped per micro-batch" in rows[0] and KNOB in rows[0]
    assert "scheduler steps every optimizer step" in rows[0]
    assert rows[1].startswith(f"| 2 | {UPDATE_TITLE} | 5 | ws2 | 1 | 3 | update 3.00x expected | unexplained |")
    assert f"- {NOTE}" in section and "- every step matched the oracle" in section


def test_html_holds_the_same_findings(report):
    page = report[1].html
    section = page[page.index("<h2>Semantic findings</h2>"):page.index("<h2>Stability and noise warnings</h2>")]
    assert "<h3>lightning/aligned: fail, 2 findings</h3>" in section
    for cell in (LR_TITLE, UPDATE_TITLE, "2", "5", "unexplained", KNOB):
        assert f"<td>{html.escape(cell)}</td>" in section, cell
    assert f"<li>{html.escape(NOTE)}</li>" in section


def test_each_probe_run_with_series_gets_a_two_panel_plot_with_its_caption(report):
    _, files = report
    probe = [p for p in files.plots if p.name.startswith("semantics_")]
    assert [p.title for p in probe] == ["accelerate/aligned semantics probe", "lightning/aligned semantics probe"]
    assert all(p.png.startswith(b"\x89PNG") for p in probe)
    assert files.html.count("data:image/png;base64,") == len(files.plots)
    assert "lightning/aligned semantics probe" in files.markdown and f"plots/{probe[1].name}" in files.markdown
    assert "a step where they leave it is where a finding starts" in files.markdown
    assert "a step where they leave it is where a finding starts" in files.html


def test_no_plots_leaves_out_the_probe_plots_but_not_the_findings(report):
    verdict, _ = report
    files = render_report(verdict, {}, with_plots=False)
    assert files.plots == [] and "data:image/png" not in files.html
    assert UPDATE_TITLE in files.markdown and "plots/semantics_" not in files.markdown


def test_probe_without_series_or_with_nulls_or_unreadable_does_not_break_the_report():
    bare = json.loads(failing_result().to_json())
    bare.pop("series")
    nulls = json.loads(failing_result().to_json())
    nulls["series"] = {"ws1": {"step": [1, 2, None], "observed_lr": [None, None, None]},
                       "ws2": {"expected_lr": [1e-3, None], "update_scale": [None, "x"]},
                       "ws3": "not a table"}
    nulls["findings"][0].update(first_step=None, expected=None, observed=[1, None], explained_by=None)
    lost = probe_record("nofile001", "accelerate", passing_result())
    lost.probe_results.clear()                      # the store could not read its probe/semantics.json
    verdict = verdict_with(probe_record("bare00001", "lightning", failing_result(), parsed=bare),
                           probe_record("nulls0001", "lightning", failing_result(), parsed=nulls), lost)
    assert semantics_cell(verdict, "accelerate") == "pass (0 findings)"    # the metrics still judge it
    files = render_report(verdict, {})
    probe = [p for p in files.plots if p.name.startswith("semantics_")]
    assert len(probe) == 1 and probe[0].png.startswith(b"\x89PNG")     # only ws2's expected LR is drawable
    assert "### lightning/aligned: fail, 2 findings (probe run bare0000)" in files.markdown
    assert "### lightning/aligned: fail, 2 findings (probe run nulls000)" in files.markdown
    assert "### accelerate/aligned: pass, 0 findings" in files.markdown
    assert "probe/semantics.json of probe run nofile00 could not be read" in files.markdown
    assert f"| 1 | {LR_TITLE} |  | ws1 |  | [1, null] |" in files.markdown
    assert probe_plots([probe_record("empty0001", "x", None, parsed={"series": None})]) == []


@pytest.mark.parametrize("scales, scale", [([1.0, 1.0, 3.0], "linear"), ([1.0, 0.01, 30.0, None], "log"),
                                           ([1.0, -0.5, 40.0], "linear")])
def test_update_scale_goes_log_only_when_its_positive_range_is_wide(scales, scale):
    from matplotlib.figure import Figure

    from evalkit.verdict.probe_plots import _log_if_wide, probe_series

    ax = Figure().subplots()
    jobs = probe_series({"series": {"ws1": {"update_scale": scales}}})
    _log_if_wide(ax, [cols.get("update_scale") for cols in jobs.values()])
    assert ax.get_yscale() == scale


def test_a_report_without_probe_runs_says_so():
    files = render_report(verdict_with(), {}, with_plots=False)
    assert "## Semantic findings\n\n- none: no such probe run" in files.markdown


def log_probe_run(client, exp_id: str, trainer: str, files: dict[str, str]) -> str:
    tags = {names.ROLE: names.ROLE_PROBE, names.PROBE: "semantics", names.TRAINER: trainer, names.MODE: "aligned",
            names.TASK: "semantics_truth", names.CALIBER: TRUTH_CALIBER}
    run_id = client.create_run(exp_id, tags=tags).info.run_id
    client.log_metric(run_id, names.probe_pass("semantics"), 0.0)
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in files.items():
            (Path(tmp) / name).write_text(text)
            client.log_artifact(run_id, str(Path(tmp) / name), names.PROBE_ARTIFACT_DIR)
    client.set_terminated(run_id, "FINISHED")
    return run_id


def test_the_store_reads_probe_results_in_place_and_by_download(tmp_path):
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    exp_id = client.create_experiment("evalkit", artifact_location=(tmp_path / "artifacts").as_uri())
    result = failing_result()
    good = log_probe_run(client, exp_id, "lightning", {
        "semantics.json": result.to_json(), "semantics.md": result.to_markdown("semantics probe"),
        "semantics_evidence.json": json.dumps({"jobs": []})})
    broken = log_probe_run(client, exp_id, "accelerate", {"semantics.json": '{"dimension": "semantics", "fin'})
    bare = log_probe_run(client, exp_id, "fabric", {})

    _, _, read = store.read_runs(uri, "evalkit")
    by_id = {r.run_id: r for r in read}
    assert set(by_id) == {good, broken, bare}
    parsed = by_id[good].probe_results
    assert set(parsed) == {"semantics"}                            # not the evidence beside it
    assert parsed["semantics"] == json.loads(result.to_json())
    assert [f["title"] for f in parsed["semantics"]["findings"]] == [LR_TITLE, UPDATE_TITLE]
    assert by_id[broken].probe_results == {} and by_id[bare].probe_results == {}

    for record in read:
        record.probe_results = {}
        record.artifact_uri = "mlflow-artifacts:/not/local"       # forces the download path
    store.load_curves(client, read, workers=2)
    assert by_id[good].probe_results["semantics"]["series"]["ws2"]["update_scale"][6] is None
    assert set(by_id[good].probe_results) == {"semantics"}
    assert by_id[broken].probe_results == {} and by_id[bare].probe_results == {}


def crashed_record(run_id: str, trainer: str, crashed_job: str = "", probe: str = "semantics") -> RunRecord:
    """A probe run that crashed before judging: FAILED, no pass metric, its failure reason (and, when a job of the
    wrapper crashed unplanted before it, that job)."""
    tags = {names.ROLE: names.ROLE_PROBE, names.PROBE: probe, names.TRAINER: trainer, names.MODE: "aligned",
            names.TASK: "semantics_truth", names.CALIBER: TRUTH_CALIBER,
            names.FAILURE_REASON: "KeyError: 'ws1-noclip'"}
    if crashed_job:
        tags[names.PROBE_CRASHED_JOB] = crashed_job
    return RunRecord(run_id, "FAILED", tags, {})


def test_a_probe_that_crashed_is_inconclusive_with_its_cause_not_missing_or_passed():
    verdict = verdict_with(crashed_record("probecrash01", "lightning"),
                           probe_record("probepass0002", "accelerate", passing_result()),
                           crashed_record("probecrash02", "accelerate"))
    lightning = next(r for r in verdict.rows if r.key.trainer == "lightning").dimensions["semantics"]
    assert lightning.status == "inconclusive" and lightning.figure == "1/1 probe runs crashed"
    assert "ended FAILED before judging (KeyError: 'ws1-noclip'): evalkit's own probe machinery" in lightning.reasons[0]
    assert "evalkit probe=semantics trainer=lightning trainer.mode=aligned" in lightning.reasons[0]
    accelerate = next(r for r in verdict.rows if r.key.trainer == "accelerate").dimensions["semantics"]
    assert accelerate.status == "inconclusive", accelerate.cell()    # a pass beside a crash is not a pass
    assert accelerate.figure == "0 findings, 1/2 probe runs crashed" and "probecra" in accelerate.reasons[0]


def test_a_probe_stopped_by_the_wrappers_own_crash_fails_and_names_the_job():
    crashed = "ws1-noclip: RuntimeError: mat1 and mat2 shapes cannot be multiplied"
    verdict = verdict_with(crashed_record("probecrash03", "lightning", crashed_job=crashed),
                           probe_record("probepass0004", "accelerate", passing_result()),
                           crashed_record("probecrash04", "accelerate", crashed_job=crashed))
    for trainer in ("lightning", "accelerate"):           # a pass beside the crash does not soften it
        cell = next(r for r in verdict.rows if r.key.trainer == trainer).dimensions["semantics"]
        assert cell.status == "fail", cell.cell()
        assert "probe runs crashed" in cell.figure
        assert f"the wrapper's job crashed where nothing was planted ({crashed})" in cell.reasons[-1]


def test_the_sweeps_comparison_fills_a_column_only_where_no_probe_ran_and_says_so():
    verdict = verdict_with(crashed_record("probecrash05", "lightning", probe="consistency"))
    lightning = next(r for r in verdict.rows if r.key.trainer == "lightning").dimensions
    assert lightning["consistency"].status == "inconclusive", lightning["consistency"].cell()
    assert "sweep" not in lightning["consistency"].figure                  # the crash is the cell, not the sweep
    accelerate = next(r for r in verdict.rows if r.key.trainer == "accelerate").dimensions
    for dim in ("consistency", "performance"):
        assert accelerate[dim].status != "not run" and accelerate[dim].figure.endswith("; sweep, no probe")
        assert accelerate[dim].reasons[-1].startswith(f"no {dim} probe ran for this arm: judged from the sweep's")


def test_a_functional_column_without_its_probe_is_never_a_plain_pass():
    """Issue 44: with its probe crashed (machinery, nothing judged) the functional column read `pass (3/3 runs ok)`,
    and with no probe at all the same; now the crash is inconclusive, and the sweep's own jobs say they are the
    only evidence, as consistency and performance do."""
    verdict = verdict_with(crashed_record("probecrash06", "lightning", probe="functional"))
    lightning = next(r for r in verdict.rows if r.key.trainer == "lightning").dimensions["functional"]
    assert lightning.status == "inconclusive", lightning.cell()
    assert lightning.figure == "3/3 runs ok, 1/1 probe runs crashed"
    assert "evalkit's own probe machinery" in lightning.reasons[-1]
    accelerate = next(r for r in verdict.rows if r.key.trainer == "accelerate").dimensions["functional"]
    assert accelerate.status == "pass" and accelerate.figure == "3/3 runs ok; sweep, no probe", accelerate.cell()
    assert accelerate.reasons[-1].startswith("no functional probe ran for this arm: judged from the sweep's")


def test_a_probe_run_left_running_is_inconclusive_not_missing():
    """Issue 44: a probe run left RUNNING (its controller OOM-killed, or still at work) with no answer read 'not run',
    as if nobody had asked; it is inconclusive, naming the run and what to do."""
    left = crashed_record("proberunning1", "lightning", probe="stability")
    left = RunRecord(left.run_id, "RUNNING", {k: v for k, v in left.tags.items() if k != names.FAILURE_REASON}, {})
    cell = next(r for r in verdict_with(left).rows if r.key.trainer == "lightning").dimensions["stability"]
    assert cell.status == "inconclusive", cell.cell()
    assert cell.figure == "1/1 probe runs still RUNNING"
    assert "proberun " in cell.reasons[0] and "evalkit-ship" in cell.reasons[0]
