"""Reading evalkit job and probe runs back from MLflow: one paged search, then the artifacts in bulk.

Curves come from the `records/*.csv` artifacts, never from per-metric history calls; a probe run's
findings from its `probe/<dimension>.json` artifacts. A local artifact store (the embedded SQLite
default) is read in place; any other store is downloaded with a thread pool.
"""
from __future__ import annotations

import json
import os
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import unquote, urlparse

from evalkit import names
from evalkit.analysis.records import RunRecord, parse_csv

STEPS_CSV, VAL_CSV = names.STEPS_CSV, names.VAL_CSV
STEP_COLUMNS = ("step", "loss", "lr", "grad_norm", "step_time_s")  # what curves and plots use
VAL_COLUMNS = None  # all: the metric's column is named after the metric
PAGE_SIZE = 1000
READ_ROLES = (names.ROLE_JOB, names.ROLE_PROBE)


class StoreError(Exception):
    """Bad input on the store side: unreachable URI, unknown experiment, nothing to analyse."""


def default_tracking_uri() -> str:
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{Path.cwd() / 'mlflow.db'}"


def connect(tracking_uri: str):
    """An MlflowClient for `tracking_uri`; refuses a SQLite file that does not exist (MLflow would
    silently create an empty store) and fails fast on an unreachable server."""
    if tracking_uri.startswith(("http://", "https://")):  # MLflow's default retries take minutes
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "15")
    if tracking_uri.startswith("sqlite:///"):
        path = Path(tracking_uri[len("sqlite:///"):])
        if not path.is_file():
            raise StoreError(f"no MLflow store at {path} (tracking URI {tracking_uri})")
    from mlflow.tracking import MlflowClient

    try:
        return MlflowClient(tracking_uri=tracking_uri)
    except Exception as exc:  # MLflow raises many types for a bad URI
        raise StoreError(f"cannot open tracking URI {tracking_uri}: {exc}") from exc


def experiment_id(client, name: str) -> str:
    try:
        experiment = client.get_experiment_by_name(name)
    except Exception as exc:
        raise StoreError(f"tracking URI unreachable ({client.tracking_uri}): {exc}") from exc
    if experiment is None:
        raise StoreError(f"unknown experiment {name!r} at {client.tracking_uri}")
    return experiment.experiment_id


def run_filter(role: str, sweep_id: str | None = None, parent_run_id: str | None = None) -> str:
    clauses = [f"tags.\"{names.ROLE}\" = '{role}'"]
    if sweep_id:
        clauses.append(f"tags.\"{names.SWEEP_ID}\" = '{_quote(sweep_id)}'")
    if parent_run_id:
        clauses.append(f"tags.\"{names.MLFLOW_PARENT_RUN}\" = '{_quote(parent_run_id)}'")
    return " AND ".join(clauses)


def _quote(value: str) -> str:
    return value.replace("'", "\\'")


def search_records(
    client, exp_id: str, sweep_id: str | None = None, parent_run_id: str | None = None,
    page_size: int = PAGE_SIZE,
) -> list[RunRecord]:
    """Every active job (and probe) run matching the filters, paging through all results."""
    records: list[RunRecord] = []
    for role in READ_ROLES:
        token = None
        while True:
            page = client.search_runs(
                [exp_id], run_filter(role, sweep_id, parent_run_id),
                max_results=page_size, page_token=token,
            )
            records.extend(_record(run) for run in page)
            token = page.token
            if not token:
                break
    if sweep_id or parent_run_id:
        seen = {r.run_id for r in records}
        records += [_record(client.get_run(run_id)) for run_id in reused_runs(client, exp_id, sweep_id, parent_run_id)
                    if run_id not in seen]
    return records


def reused_runs(client, exp_id: str, sweep_id: str | None, parent_run_id: str | None) -> list[str]:
    """The runs of earlier sweeps that the chosen sweep (or parent run) kept with `sweep.resume=true`: they are
    part of it, though their parent and sweep id are the earlier sweep's."""
    if parent_run_id:
        parents = [client.get_run(parent_run_id)]
    else:
        query = f"tags.\"{names.ROLE}\" = '{names.ROLE_SWEEP}' AND tags.\"{names.SWEEP_ID}\" = '{_quote(sweep_id)}'"
        parents = client.search_runs([exp_id], query, max_results=1000)
    found: list[str] = []
    for parent in parents:
        if int(parent.data.tags.get(names.JOBS_REUSED, "0") or 0):
            path = client.download_artifacts(parent.info.run_id, names.REUSED_RUNS_ARTIFACT)
            found += json.loads(Path(path).read_text())
    return list(dict.fromkeys(found))


def _record(run) -> RunRecord:
    return RunRecord(
        run.info.run_id, run.info.status, dict(run.data.tags), dict(run.data.metrics),
        artifact_uri=run.info.artifact_uri or "",
    )


def load_curves(client, records: list[RunRecord], workers: int = 8) -> None:
    """Fill `steps` and `val` of every record from its CSV artifacts, and `probe_results` of every probe run
    from its `probe/<dim>.json` artifacts (missing or unreadable files leave them empty)."""
    if not records:
        return
    with tempfile.TemporaryDirectory(prefix="evalkit-verdict-") as scratch:
        def load(record: RunRecord) -> None:
            folder = _records_folder(client, record, scratch)
            if folder is not None:
                record.steps = _read(folder / Path(STEPS_CSV).name, STEP_COLUMNS)
                record.val = _read(folder / Path(VAL_CSV).name, VAL_COLUMNS)
            if record.role == names.ROLE_PROBE:
                record.probe_results = _probe_results(client, record, scratch)

        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            list(pool.map(load, records))


def _records_folder(client, record: RunRecord, scratch: str) -> Path | None:
    local = _local_path(record.artifact_uri)
    if local is not None:
        return local / names.RECORDS_DIR
    dst = Path(scratch) / record.run_id
    dst.mkdir(exist_ok=True)
    found = None
    for name in (STEPS_CSV, VAL_CSV):   # only these: not the folder (one more request, and the larger micro CSV)
        try:
            found = Path(client.download_artifacts(record.run_id, name, str(dst))).parent
        except Exception:  # noqa: BLE001 - not logged (a run that failed at start-up, a run without validation)
            continue
    return found


def _probe_results(client, record: RunRecord, scratch: str) -> dict[str, dict]:
    """dimension -> the parsed `probe/<dimension>.json` of a probe run; files that cannot be read are left out."""
    results = {}
    for path in _probe_files(client, record, scratch):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):  # missing, half-written or not JSON: the metrics still judge the run
            continue
        if isinstance(data, dict):
            results[path.stem] = data
    return results


def _probe_files(client, record: RunRecord, scratch: str) -> list[Path]:
    """The run's probe result files: read in place from a local store, else only these files downloaded
    (not the evidence beside them, which can be large)."""
    local = _local_path(record.artifact_uri)
    if local is not None:
        folder = local / names.PROBE_ARTIFACT_DIR
        return sorted(p for p in folder.glob("*.json") if _is_result(p.name)) if folder.is_dir() else []
    try:
        listed = client.list_artifacts(record.run_id, names.PROBE_ARTIFACT_DIR)
    except Exception:  # no probe artifacts, or the store refused: the run's metrics still judge it
        return []
    dst = Path(scratch) / record.run_id / "probe-results"
    dst.mkdir(parents=True, exist_ok=True)
    files = []
    for item in listed:
        if item.is_dir or not _is_result(Path(item.path).name):
            continue
        try:
            files.append(Path(client.download_artifacts(record.run_id, item.path, str(dst))))
        except Exception:  # one file the store cannot give: the others still count
            continue
    return files


def _is_result(name: str) -> bool:
    """`probe/<dim>.json`, not the evidence or the measurements stored beside it."""
    return name.endswith(".json") and not name.endswith((names.PROBE_EVIDENCE_SUFFIX, names.PROBE_MEASURED_SUFFIX))


def _local_path(artifact_uri: str) -> Path | None:
    parsed = urlparse(artifact_uri)
    if parsed.scheme == "file":
        return Path(unquote(parsed.path))
    if parsed.scheme == "" and artifact_uri:
        return Path(artifact_uri)
    return None


def _read(path: Path, wanted):
    try:
        return parse_csv(path.read_text(), wanted)
    except (FileNotFoundError, NotADirectoryError):
        return {}


def read_runs(
    tracking_uri: str, experiment: str, sweep_id: str | None = None,
    parent_run_id: str | None = None, workers: int = 8,
) -> tuple[object, str, list[RunRecord]]:
    """(client, experiment id, records with curves) for the verdict; StoreError on bad input."""
    client = connect(tracking_uri)
    exp_id = experiment_id(client, experiment)
    try:
        records = search_records(client, exp_id, sweep_id, parent_run_id)
    except Exception as exc:
        raise StoreError(f"searching runs failed: {exc}") from exc
    if not records:
        scope = f" for sweep {sweep_id}" if sweep_id else ""
        scope += f" under parent run {parent_run_id}" if parent_run_id else ""
        raise StoreError(f"no evalkit job or probe runs in experiment {experiment!r}{scope}")
    load_curves(client, records, workers)
    return client, exp_id, records
