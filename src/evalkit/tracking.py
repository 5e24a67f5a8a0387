"""MLflow plumbing: where the store is, whether it answers, and batched writes within MLflow's limits."""
from __future__ import annotations

import os
import time
import urllib.error
import urllib.request
from typing import Any, Iterable

from mlflow.entities import Metric, Param, RunTag
from mlflow.tracking import MlflowClient

from evalkit.secrets import REDACTED, is_secret_key

DEFAULT_URI_ENV = "EVALKIT_DEFAULT_TRACKING_URI"
MAX_METRICS_PER_BATCH = 1000
MAX_PARAMS_PER_BATCH = 100
MAX_PARAM_VALUE = 6000
MAX_TAG_VALUE = 5000


class TrackingUnavailable(RuntimeError):
    """The tracking store cannot be reached (the message names the URI and the fix)."""


def fix_default_uri(launch_dir: str | None = None) -> str:
    """Pin the embedded default store to an absolute path once, at start, for every job of a sweep."""
    if DEFAULT_URI_ENV not in os.environ:
        path = os.path.abspath(os.path.join(launch_dir or os.getcwd(), "mlflow.db"))
        os.environ[DEFAULT_URI_ENV] = f"sqlite:///{path}"
    return os.environ[DEFAULT_URI_ENV]


def resolve_uri(configured: str | None) -> str:
    """MLFLOW_TRACKING_URI wins, then tracking.uri, then the local SQLite store in the launch directory."""
    return os.environ.get("MLFLOW_TRACKING_URI") or configured or fix_default_uri()


def check_reachable(uri: str, timeout_s: float = 5.0) -> None:
    if not uri.startswith(("http://", "https://")):
        return
    try:
        with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=timeout_s) as response:
            if response.status == 200:
                return
            problem = f"HTTP {response.status}"
    except (urllib.error.URLError, OSError) as exc:
        problem = str(getattr(exc, "reason", exc))
    raise TrackingUnavailable(
        f"MLflow tracking server {uri} is unreachable ({problem}): start it (mlflow server ...), fix "
        f"tracking.uri / MLFLOW_TRACKING_URI, or unset both to use the local store ./mlflow.db")


def experiment_id(client: MlflowClient, name: str) -> str:
    found = client.get_experiment_by_name(name)
    if found is not None:
        if found.lifecycle_stage == "deleted":
            client.restore_experiment(found.experiment_id)
        return found.experiment_id
    try:
        return client.create_experiment(name)
    except Exception:  # noqa: BLE001 - a parallel job created it first
        return client.get_experiment_by_name(name).experiment_id


def flatten(tree: Any, prefix: str = "") -> dict[str, str]:
    """Dotted keys for nested dicts; values rendered as strings, credential-like keys redacted."""
    if isinstance(tree, dict):
        out: dict[str, str] = {}
        for key, value in tree.items():
            out.update(flatten(value, f"{prefix}{key}."))
        return out
    key = prefix[:-1]
    value = REDACTED if is_secret_key(key) and tree not in (None, "") else tree
    return {key[:250]: str(value)[:MAX_PARAM_VALUE]}


def log_params(client: MlflowClient, run_id: str, params: dict[str, str]) -> None:
    items = [Param(k, v) for k, v in params.items()]
    for i in range(0, len(items), MAX_PARAMS_PER_BATCH):
        client.log_batch(run_id, params=items[i:i + MAX_PARAMS_PER_BATCH])


def set_tags(client: MlflowClient, run_id: str, tags: dict[str, Any]) -> None:
    items = [RunTag(k, str(v)[:MAX_TAG_VALUE]) for k, v in tags.items() if v is not None]
    for i in range(0, len(items), MAX_PARAMS_PER_BATCH):
        client.log_batch(run_id, tags=items[i:i + MAX_PARAMS_PER_BATCH])


def metric(key: str, value: float, step: int, wall: float | None = None) -> Metric:
    return Metric(key, float(value), int((wall or time.time()) * 1000), int(step))


def log_metrics(client: MlflowClient, run_id: str, metrics: Iterable[Metric],
                batch_size: int = MAX_METRICS_PER_BATCH) -> int:
    """Send metrics in log_batch calls of at most `batch_size` points; returns the number sent."""
    items = list(metrics)
    batch_size = min(batch_size, MAX_METRICS_PER_BATCH)
    for i in range(0, len(items), batch_size):
        client.log_batch(run_id, metrics=items[i:i + batch_size])
    return len(items)
