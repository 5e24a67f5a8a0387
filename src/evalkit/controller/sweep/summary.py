"""A sweep's parent run made readable before anyone expands it: summary metrics per wrapper and mode, and a
description (markdown) with the same figures as a table; the verdict, once it has judged the sweep, on top."""
from __future__ import annotations

import statistics
from collections import defaultdict

from mlflow.entities import Run
from mlflow.tracking import MlflowClient

from evalkit import names
from evalkit.controller import tracking

VERDICT_HEADING = "## Verdict"
JOBS_HEADING = "## Jobs"
# (column, metric read from each job run, summary metric name)
JOB_FIGURES = (("final train loss", names.TRAIN_LOSS, "train_loss"),
               ("samples/s", names.PERF_SAMPLES_PER_S, "samples_per_s"))


def children(client: MlflowClient, parent: Run) -> list[Run]:
    return client.search_runs([parent.info.experiment_id], f"tags.`{names.MLFLOW_PARENT_RUN}` = '{parent.info.run_id}'",
                              max_results=10000)


def arm(run: Run) -> str:
    tags = run.data.tags
    return f"{tags.get(names.TRAINER, '?')}.{tags.get(names.MODE, '?')}"


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def job_summary(runs: list[Run]) -> tuple[dict[str, float], list[str]]:
    """(summary metrics, markdown table lines) over job runs, one row per wrapper and mode."""
    groups: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        groups[arm(run)].append(run)
    metrics: dict[str, float] = {}
    val_names = sorted({k for r in runs for k in r.data.metrics if k.startswith(names.VAL_PREFIX)})
    headers = ["wrapper", "mode", "jobs", "finished"] + [c for c, _, _ in JOB_FIGURES] + val_names
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for key in sorted(groups):
        group = groups[key]
        finished = [r for r in group if r.info.status == "FINISHED"]
        trainer, mode = key.split(".", 1)
        cells = [trainer, mode, str(len(group)), str(len(finished))]
        metrics[f"summary/{key}/jobs_finished"] = len(finished)
        for _, source, short in JOB_FIGURES + tuple((v, v, v.replace("/", "_")) for v in val_names):
            value = _mean([r.data.metrics[source] for r in finished if source in r.data.metrics])
            cells.append(_fmt(value))
            if value is not None:
                metrics[f"summary/{key}/{short}"] = value
        lines.append("| " + " | ".join(cells) + " |")
    return metrics, lines


def probe_summary(runs: list[Run]) -> tuple[dict[str, float], list[str]]:
    """(summary metrics, markdown table lines) over probe runs: each one's outcome and headline."""
    metrics: dict[str, float] = {}
    lines = ["| wrapper | mode | probe | outcome | figures |", "|---|---|---|---|---|"]
    for run in sorted(runs, key=lambda r: (arm(r), r.data.tags.get(names.PROBE, ""))):
        tags, dim = run.data.tags, run.data.tags.get(names.PROBE, "?")
        status = tags.get(names.probe_status(dim)) or run.info.status.lower()
        trainer, mode = arm(run).split(".", 1)
        figures = tags.get(names.probe_headline(dim)) or tags.get(names.probe_reason(dim)) or \
            tags.get(names.FAILURE_REASON, "")
        lines.append(f"| {trainer} | {mode} | {dim} | {status} | {figures.replace('|', '/')} |")
        if names.probe_pass(dim) in run.data.metrics:
            metrics[f"summary/{arm(run)}/{dim}_pass"] = run.data.metrics[names.probe_pass(dim)]
    return metrics, lines


def summarize(client: MlflowClient, parent_id: str, headline: str,
              reused: list[str] = ()) -> tuple[list[str], bool]:
    """Log the summary metrics on the parent and make its description `headline` and the tables; a verdict
    section already there stays on top. Returns (the summary metrics worth a column, whether the sweep ran
    training jobs). `reused`: runs of earlier sweeps this one kept (`sweep.resume`), summarized with its own."""
    parent = client.get_run(parent_id)
    exp = parent.info.experiment_id
    runs = children(client, parent) + [client.get_run(r) for r in reused]
    jobs = [r for r in runs if r.data.tags.get(names.ROLE) != names.ROLE_PROBE]
    probes = [r for r in runs if r.data.tags.get(names.ROLE) == names.ROLE_PROBE]
    metrics: dict[str, float] = {}
    parts = [headline]
    for chosen, summary in ((jobs, job_summary), (probes, probe_summary)):
        if chosen:
            found, lines = summary(chosen)
            metrics.update(found)
            parts.append("\n".join(lines))
    if reused:
        parts.append("Reused from earlier sweeps: " + ", ".join(f"[{r[:8]}](#/experiments/{exp}/runs/{r})"
                                                                 for r in reused))
    tracking.log_metrics(client, parent_id, [tracking.metric(k, v, 0) for k, v in metrics.items()])
    note = JOBS_HEADING + "\n\n" + "\n\n".join(parts)
    verdict = verdict_section(parent.data.tags.get(names.MLFLOW_NOTE, ""))
    tracking.set_tags(client, parent_id, {names.MLFLOW_NOTE: fit((verdict + "\n\n" if verdict else "") + note)})
    columns = [k for k in metrics if k.endswith(("/train_loss", "_pass")) or "/val_" in k]
    return columns, bool(jobs)


def fit(note: str, limit: int = tracking.MAX_TAG_VALUE) -> str:
    """`note` cut at a line boundary to fit a tag, saying so, instead of cut inside a table row."""
    if len(note) <= limit:
        return note
    tail = "\n\n… (cut to fit MLflow's description: the full tables are in the runs below and the verdict run)"
    return note[:limit - len(tail)].rsplit("\n", 1)[0] + tail


def verdict_section(note: str) -> str:
    """The verdict section of a parent's description ('' when none)."""
    if not note.startswith(VERDICT_HEADING):
        return ""
    return note.split("\n" + JOBS_HEADING, 1)[0].rstrip()


def put_verdict(client: MlflowClient, parent_id: str, verdict_markdown: str, verdict_run_id: str) -> None:
    """Put the verdict on top of a parent's description (replacing an earlier one) and link the verdict run."""
    note = client.get_run(parent_id).data.tags.get(names.MLFLOW_NOTE, "")
    rest = note[len(verdict_section(note)):].lstrip()
    tracking.set_tags(client, parent_id, {
        names.MLFLOW_NOTE: fit(f"{VERDICT_HEADING}\n\n{verdict_markdown.strip()}" + (f"\n\n{rest}" if rest else "")),
        names.VERDICT_RUN_ID: verdict_run_id})
