"""Render the report files and publish them: to a local folder and as a "verdict" MLflow run."""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from evalkit import names
from evalkit.probes.catalog import dimension_names
from evalkit.verdict.build import Verdict
from evalkit.verdict.dimensions import FAIL
from evalkit.verdict.figure import Plot
from evalkit.verdict.plots import all_plots
from evalkit.verdict.report import blocks, render_html, render_markdown, summary_blocks
from evalkit.verdict.serialize import verdict_dict

TITLE = "evalkit verdict"
RECORD_FILE = "record.json"
REPORT_FILES = ("verdict.md", "verdict.html", names.VERDICT_JSON_FILE)


@dataclass(frozen=True)
class ReportFiles:
    markdown: str
    html: str
    data: dict
    plots: list[Plot]

    def write(self, folder: Path) -> list[Path]:
        """verdict.md, verdict.html, verdict.json and plots/*.png under `folder`."""
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "plots").mkdir(exist_ok=True)
        written = [folder / name for name in REPORT_FILES]
        written[0].write_text(self.markdown, encoding="utf-8")
        written[1].write_text(self.html, encoding="utf-8")
        written[2].write_text(json.dumps(self.data, indent=2), encoding="utf-8")
        for plot in self.plots:
            path = folder / "plots" / plot.name
            path.write_bytes(plot.png)
            written.append(path)
        return written


def render_report(verdict: Verdict, inputs: dict, with_plots: bool = True) -> ReportFiles:
    plots = all_plots(verdict) if with_plots else []
    parts = blocks(verdict, plots, inputs)
    return ReportFiles(render_markdown(TITLE, parts), render_html(TITLE, parts),
                       verdict_dict(verdict, inputs), plots)


@dataclass
class VerdictRecord:
    """What the verdict run records beside its report files. Kept as `record.json` beside the report when the
    store fails, so `evalkit-verdict --record` records it later without reading the runs again."""
    experiment_id: str
    run_name: str
    tags: dict
    params: dict
    metrics: dict
    summary: str                  # the verdict table (markdown): the judged sweeps' descriptions quote it
    scenario: str
    inputs: dict
    run_id: str | None = None     # a run the failed attempt created: the next one completes it


def verdict_record(verdict: Verdict, inputs: dict, experiment_id: str) -> VerdictRecord:
    tags = {names.ROLE: names.ROLE_VERDICT, names.SCENARIO: verdict.options.scenario}
    for key, tag in (("sweep_id", names.SWEEP_ID), ("parent_run_id", names.JUDGED_PARENT_RUN)):
        if inputs.get(key):
            tags[tag] = str(inputs[key])
    o = verdict.options
    params = {"alpha": o.alpha, "default_margin": o.default_margin, "throughput_min": o.throughput_min,
              "memory_max": o.memory_max, "scenario": o.scenario, "arms": len(verdict.arms)}
    fails = {d: sum(r.dimensions[d].status == FAIL for r in verdict.rows) for d in dimension_names()}
    metrics = {**{f"verdict/fails/{d}": n for d, n in fails.items()}, "verdict/rows": len(verdict.rows)}
    return VerdictRecord(experiment_id, f"verdict-{o.scenario}", tags, {k: str(v) for k, v in params.items()},
                         metrics, render_markdown(None, summary_blocks(verdict)).strip(), o.scenario, inputs)


def log_verdict_run(client, record: VerdictRecord, folder: Path) -> str:
    """A FINISHED run tagged `evalkit.role=verdict` holding the report files of `folder` as artifacts (the run
    a failed attempt created, when `record` names one)."""
    from mlflow.entities import Metric, Param, RunTag

    adopted = os.environ.pop("MLFLOW_RUN_ID", None) if record.run_id is None else None
    if adopted:      # `mlflow run -e verdict` created the run: the verdict records into it
        record.run_id = adopted
        client.log_batch(adopted, tags=[RunTag(k, str(v)) for k, v in
                                        {"mlflow.runName": record.run_name, **record.tags}.items() if v is not None])
    elif record.run_id is None:
        from evalkit.controller.tracking import source_tags

        tags = {**source_tags(client.tracking_uri, "evalkit-verdict"), **record.tags}
        record.run_id = client.create_run(record.experiment_id, tags=tags, run_name=record.run_name).info.run_id
    run_id = record.run_id
    now = int(time.time() * 1000)
    try:
        client.log_batch(run_id, params=[Param(k, v) for k, v in record.params.items()],
                         metrics=[Metric(k, float(v), now, 0) for k, v in record.metrics.items()])
        client.log_artifacts(run_id, str(folder), artifact_path=names.VERDICT_ARTIFACT_DIR)
    except Exception:
        with contextlib.suppress(Exception):   # a store that answers again marks it; the next attempt ends it
            client.set_terminated(run_id, "FAILED")
        raise
    client.set_terminated(run_id, "FINISHED")
    try:
        link_sweeps(client, record)
    except Exception as exc:  # noqa: BLE001 - the verdict run is recorded; the links are a courtesy
        print(f"note: the verdict run {run_id} is recorded, but the sweep runs' descriptions could not be updated "
              f"({type(exc).__name__}: {str(exc)[:200]})", file=sys.stderr)
    return run_id


def keep_unrecorded(record: VerdictRecord, files: ReportFiles, out: Path | None) -> Path:
    """The report and `record.json` in `out` (else a new ./verdict-unrecorded-<time>/), for `--record`."""
    folder = out or Path(f"verdict-unrecorded-{time.strftime('%Y%m%d-%H%M%S')}").absolute()
    files.write(folder)
    (folder / RECORD_FILE).write_text(json.dumps(asdict(record), indent=1), encoding="utf-8")
    return folder


def record_kept(client, folder: Path) -> tuple[str, VerdictRecord]:
    """Record the verdict kept in `folder` by `keep_unrecorded`: (its run id, its record). Raises ValueError for a
    folder that holds none."""
    try:
        record = VerdictRecord(**json.loads((folder / RECORD_FILE).read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError) as exc:
        raise ValueError(f"{folder} holds no verdict kept for recording ({folder / RECORD_FILE}: "
                         f"{type(exc).__name__}): give the folder evalkit-verdict named when the store "
                         "failed") from None
    with tempfile.TemporaryDirectory(prefix="evalkit-verdict-") as tmp:
        for name in REPORT_FILES:
            if (folder / name).exists():
                shutil.copy2(folder / name, Path(tmp) / name)
        if (folder / "plots").is_dir():
            shutil.copytree(folder / "plots", Path(tmp) / "plots")
        run_id = log_verdict_run(client, record, Path(tmp))
    (folder / RECORD_FILE).rename(folder / f"{RECORD_FILE}.recorded")   # a second --record would not find it
    return run_id, record


def judged_sweeps(client, experiment_id: str, inputs: dict) -> list[str]:
    """The parent runs of what the verdict judged: the one asked for, else every parent of the sweep id
    (`evalkit-eval` runs the training sweep and each probe as sweeps of one id); none for a whole experiment."""
    if inputs.get("parent_run_id"):
        return [inputs["parent_run_id"]]
    if not inputs.get("sweep_id"):
        return []
    query = f"tags.`{names.ROLE}` = '{names.ROLE_SWEEP}' and tags.`{names.SWEEP_ID}` = '{inputs['sweep_id']}'"
    return [r.info.run_id for r in client.search_runs([experiment_id], query, max_results=1000)]


def link_sweeps(client, record: VerdictRecord) -> None:
    """The verdict table on top of each judged sweep's description, linking the verdict run, whose own
    description links those sweeps back."""
    from evalkit.controller import tracking
    from evalkit.controller.sweep.summary import fit, put_verdict

    experiment_id, run_id = record.experiment_id, record.run_id
    link = lambda rid, text: f"[{text}](#/experiments/{experiment_id}/runs/{rid})"  # noqa: E731
    parents = judged_sweeps(client, experiment_id, record.inputs)
    for parent in parents:
        put_verdict(client, parent, f"{record.summary}\n\nThe full report: {link(run_id, 'the verdict run')}, "
                                    "artifact verdict/verdict.html.", run_id)
    judged = ", ".join(link(p, f"sweep run {p[:8]}") for p in parents) or f"experiment {experiment_id}"
    tracking.set_tags(client, run_id, {names.MLFLOW_NOTE: fit(
        f"Verdict (scenario {record.scenario}) of {judged}; the full report is the artifact "
        f"verdict/verdict.html.\n\n{record.summary}")})
