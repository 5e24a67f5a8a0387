"""What a user sees of evalkit's runs in the MLflow UI: the experiment's layout and description, a run's
description in one line, and the address of a run to open."""
from __future__ import annotations

import json
from urllib.parse import urlsplit, urlunsplit

from mlflow.tracking import MlflowClient
from omegaconf import DictConfig

from evalkit import names
from evalkit.secrets import mask_url_passwords

DEFAULT_UI = "http://127.0.0.1:5000"    # where `mlflow server` / `mlflow ui` listen by default
TRAINING_LAYOUT = "workflowType=machine_learning"
SHARED_VIEW = "mlflow.sharedViewState."  # + key: a view of the runs page (columns, grouping, filter) as JSON

EXPERIMENT_DESCRIPTION = """\
**evalkit**: each training wrapper (Lightning, Fabric, Accelerate, the transformers Trainer, Ignite) trains the
same task as a hand-written PyTorch loop (the baseline), watched from the outside.

- `sweep-<id>` runs: one per sweep (`evalkit -m`); their description holds a summary per wrapper and, once
  judged, the verdict table. Expand one to see its jobs.
- job runs, named `<wrapper>-<task>-<precision>-ws<ranks>-s<seed>`: curves by optimizer step (`train/loss`,
  `train/lr`, `train/grad_norm`, `val/<metric>`), summaries (`perf/*`), the task's synthetic data as dataset
  inputs, `records/` (every step as CSV), `config/`, `env/` and `logs/` artifacts.
- probe runs (`evalkit.role = probe`): one wrapper under one probe, its findings under `probe/`.
- verdict runs (`evalkit.role = verdict`): the report under `verdict/` (open `verdict.html`).
"""


def mark_experiment(client: MlflowClient, experiment_id: str) -> None:
    """Open the experiment in MLflow's training layout, with a description of what evalkit records; a
    description a user wrote is kept."""
    try:
        tags = client.get_experiment(experiment_id).tags
        _mark(client, experiment_id, tags)
    except Exception:  # noqa: BLE001 - how the UI lays it out is never a reason for a job to fail
        pass


def _mark(client: MlflowClient, experiment_id: str, tags: dict) -> None:
    if tags.get(names.MLFLOW_EXPERIMENT_KIND) != names.EXPERIMENT_KIND_TRAINING:
        client.set_experiment_tag(experiment_id, names.MLFLOW_EXPERIMENT_KIND, names.EXPERIMENT_KIND_TRAINING)
    if not tags.get(names.MLFLOW_NOTE):
        client.set_experiment_tag(experiment_id, names.MLFLOW_NOTE, EXPERIMENT_DESCRIPTION)


def ui_base(uri: str) -> str | None:
    """The UI of a tracking server URI (its address without credentials); None for a store read directly."""
    parts = urlsplit(uri)
    if parts.scheme not in ("http", "https"):
        return None
    return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path.rstrip("/"), "", ""))


def run_address(uri: str, experiment_id: str, run_id: str | None = None) -> str:
    """`<ui>/#/experiments/<id>/runs/<run>?workflowType=machine_learning`: the page of a run (of the experiment
    without one) in MLflow's training layout (MLflow 3.17 takes the layout from the address, else from the
    browser's last choice, GenAI by default)."""
    base = ui_base(uri) or DEFAULT_UI
    return f"{base}/#/experiments/{experiment_id}/runs" + (f"/{run_id}" if run_id else "") + f"?{TRAINING_LAYOUT}"


def view_address(uri: str, experiment_id: str, key: str, charts: bool = False) -> str:
    """The experiment's runs through the shared view `key` (`share_views`), as a table or as charts."""
    base = ui_base(uri) or DEFAULT_UI
    mode = "&compareRunsMode=CHART" if charts else ""
    return f"{base}/#/experiments/{experiment_id}/runs?{TRAINING_LAYOUT}&viewStateShareKey={key}{mode}"


def serve_hint(uri: str) -> str:
    """For a store without a server, the command that serves it ('' for a server)."""
    if ui_base(uri) is not None:
        return ""
    return f" (serve the store first: mlflow server --backend-store-uri {mask_url_passwords(uri, '***')})"


def open_hint(what: str, uri: str, experiment_id: str, run_id: str | None = None) -> str:
    """One line telling where to look: the address, and for a store without a server the command that
    serves it."""
    return f"[evalkit] {what} in the MLflow UI: {run_address(uri, experiment_id, run_id)}{serve_hint(uri)}"


def share_views(client: MlflowClient, experiment_id: str, sweep_id: str, columns: list[str],
                charts: bool) -> dict[str, str]:
    """Store two views of a sweep as MLflow shared view states (experiment tags its UI opens from the address's
    `viewStateShareKey`): the runs table with the sweep's summary metrics as columns, and (`charts`: a sweep of
    training jobs) its jobs grouped by wrapper and mode, so that the chart view draws each wrapper's mean
    `train/loss` by optimizer step at once. Returns {"table" | "charts": key}."""
    selected = ["attributes.`Dataset`"] + [f"metrics.`{c}`" for c in columns]
    views = {"table": {"selectedColumns": selected}}
    if charts:
        views["charts"] = {
            "searchFilter": f"tags.`{names.SWEEP_ID}` = '{sweep_id}' and tags.`{names.ROLE}` = '{names.ROLE_JOB}'",
            "groupBy": {"aggregateFunction": "average",
                        "groupByKeys": [{"mode": "tag", "groupByData": names.TRAINER},
                                        {"mode": "tag", "groupByData": names.MODE}]},
            "selectedColumns": ["attributes.`Dataset`"]}
    keys = {}
    for kind, state in views.items():
        keys[kind] = f"evalkit-{sweep_id}-{kind}"
        client.set_experiment_tag(experiment_id, SHARED_VIEW + keys[kind], json.dumps(state))
    return keys


def trainer_label(trainer: DictConfig) -> str:
    """The trainer as a person reads it: its name, and the environment it runs in (`lightning@lightning-2.5.2`)."""
    return f"{trainer.name}{names.ENV_SEPARATOR}{trainer.env}" if trainer.get("env") else str(trainer.name)


def job_description(cfg: DictConfig, outcome: str) -> str:
    """A job run's description in one line: wrapper (and its environment), mode, task, caliber, seed and how it
    ended."""
    ranks = cfg.distributed.world_size
    return (f"{trainer_label(cfg.trainer)} ({cfg.trainer.mode}) · {cfg.task.name} · {cfg.hardware.name}, batch "
            f"{cfg.train.batch_size}×{cfg.train.grad_accum}, {cfg.precision.name}, {ranks} rank{'s' * (ranks > 1)} · "
            f"seed {cfg.seed} · {outcome}")


def log_datasets(client: MlflowClient, run_id: str, datasets: list[dict]) -> None:
    """The task's splits (`evalkit.tasks.datasets.describe`) as the run's dataset inputs, in the tensor schema
    MLflow's UI shows, with the spec that regenerates them as their source."""
    import numpy as np
    from mlflow.data.schema import TensorDatasetSchema
    from mlflow.entities import Dataset, DatasetInput, InputTag
    from mlflow.types.schema import Schema, TensorSpec

    def spec(field: dict, name: str) -> Schema:
        return Schema([TensorSpec(np.dtype(field["dtype"]), (-1, *field["shape"]), name)])

    inputs = []
    for d in datasets:
        fields = d["schema"]
        schema = TensorDatasetSchema(spec(fields["x"], "x"), spec(fields["y"], "y") if "y" in fields else None)
        dataset = Dataset(d["name"], d["digest"], "code", json.dumps(d["source"], sort_keys=True),
                          schema=json.dumps(schema.to_dict()), profile=json.dumps({"num_rows": d["rows"]}))
        inputs.append(DatasetInput(dataset, tags=[InputTag(names.MLFLOW_DATASET_CONTEXT, d["context"])]))
    client.log_inputs(run_id, datasets=inputs)
