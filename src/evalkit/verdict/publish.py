"""Render the report files and publish them: to a local folder and as a "verdict" MLflow run."""
from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from evalkit import names
from evalkit.verdict.build import Verdict
from evalkit.verdict.dimensions import DIMENSIONS, FAIL
from evalkit.verdict.figure import Plot
from evalkit.verdict.plots import all_plots
from evalkit.verdict.report import blocks, render_html, render_markdown, summary_blocks
from evalkit.verdict.serialize import verdict_dict

TITLE = "evalkit verdict"


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
        written = [folder / "verdict.md", folder / "verdict.html", folder / "verdict.json"]
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


def log_verdict_run(client, experiment_id: str, files: ReportFiles, verdict: Verdict, inputs: dict) -> str:
    """A new FINISHED run tagged `evalkit.role=verdict` holding the report files as artifacts."""
    tags = {names.ROLE: names.ROLE_VERDICT, names.SCENARIO: verdict.options.scenario}
    for key in ("sweep_id", "parent_run_id"):
        if inputs.get(key):
            tags[f"evalkit.{key}"] = str(inputs[key])
    run = client.create_run(experiment_id, tags=tags, run_name=f"verdict-{verdict.options.scenario}")
    run_id = run.info.run_id
    try:
        client.log_batch(run_id, params=_params(verdict), metrics=_metrics(verdict))
        with tempfile.TemporaryDirectory(prefix="evalkit-verdict-") as tmp:
            files.write(Path(tmp))
            client.log_artifacts(run_id, tmp, artifact_path="verdict")
    except Exception:
        client.set_terminated(run_id, "FAILED")
        raise
    client.set_terminated(run_id, "FINISHED")
    try:
        link_sweeps(client, experiment_id, run_id, verdict, inputs)
    except Exception as exc:  # noqa: BLE001 - the verdict run is recorded; the links are a courtesy
        print(f"note: the verdict run {run_id} is recorded, but the sweep runs' descriptions could not be updated "
              f"({type(exc).__name__}: {str(exc)[:200]})", file=sys.stderr)
    return run_id


def judged_sweeps(client, experiment_id: str, inputs: dict) -> list[str]:
    """The parent runs of what the verdict judged: the one asked for, else every parent of the sweep id
    (`evalkit-eval` runs the training sweep and each probe as sweeps of one id); none for a whole experiment."""
    if inputs.get("parent_run_id"):
        return [inputs["parent_run_id"]]
    if not inputs.get("sweep_id"):
        return []
    query = f"tags.`{names.ROLE}` = '{names.ROLE_SWEEP}' and tags.`{names.SWEEP_ID}` = '{inputs['sweep_id']}'"
    return [r.info.run_id for r in client.search_runs([experiment_id], query, max_results=1000)]


def link_sweeps(client, experiment_id: str, run_id: str, verdict: Verdict, inputs: dict) -> None:
    """The verdict table on top of each judged sweep's description, linking the verdict run, whose own
    description links those sweeps back."""
    from evalkit.controller import tracking
    from evalkit.controller.sweep_summary import fit, put_verdict

    summary = render_markdown(None, summary_blocks(verdict)).strip()
    link = lambda rid, text: f"[{text}](#/experiments/{experiment_id}/runs/{rid})"  # noqa: E731
    parents = judged_sweeps(client, experiment_id, inputs)
    for parent in parents:
        put_verdict(client, parent, f"{summary}\n\nThe full report: {link(run_id, 'the verdict run')}, "
                                    "artifact verdict/verdict.html.", run_id)
    judged = ", ".join(link(p, f"sweep run {p[:8]}") for p in parents) or f"experiment {experiment_id}"
    tracking.set_tags(client, run_id, {names.MLFLOW_NOTE: fit(
        f"Verdict (scenario {verdict.options.scenario}) of {judged}; the full report is the artifact "
        f"verdict/verdict.html.\n\n{summary}")})


def _params(verdict: Verdict):
    from mlflow.entities import Param

    o = verdict.options
    values = {"alpha": o.alpha, "default_margin": o.default_margin, "throughput_min": o.throughput_min,
              "memory_max": o.memory_max, "scenario": o.scenario, "arms": len(verdict.arms)}
    return [Param(k, str(v)) for k, v in values.items()]


def _metrics(verdict: Verdict):
    import time

    from mlflow.entities import Metric

    now = int(time.time() * 1000)
    fails = {d: sum(r.dimensions[d].status == FAIL for r in verdict.rows) for d in DIMENSIONS}
    metrics = [Metric(f"verdict/fails/{d}", n, now, 0) for d, n in fails.items()]
    return metrics + [Metric("verdict/rows", len(verdict.rows), now, 0)]
