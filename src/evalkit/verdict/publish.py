"""Render the report files and publish them: to a local folder and as a "verdict" MLflow run."""
from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

from evalkit import names
from evalkit.verdict.build import Verdict
from evalkit.verdict.dimensions import DIMENSIONS, FAIL
from evalkit.verdict.figure import Plot
from evalkit.verdict.plots import all_plots
from evalkit.verdict.report import blocks, render_html, render_markdown
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
    return run_id


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
