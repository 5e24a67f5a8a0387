"""A Hydra callback that gives a multirun one MLflow parent run, with every job nested under it."""
from __future__ import annotations

import json
import os
import sys
import time
import uuid
from typing import Any

from hydra.core.utils import JobReturn, JobStatus
from hydra.experimental.callback import Callback
from mlflow.tracking import MlflowClient
from omegaconf import DictConfig

from evalkit import names
from evalkit.controller import tracking
from evalkit.controller.progress import POSITION_ENV, hush_libraries, say, time_left
from evalkit.controller.sweep_summary import summarize
from evalkit.controller.ui import open_hint, share_views, view_address
from evalkit.secrets import redact_override

_active: list["SweepCallback"] = []      # the sweep of this process, while it runs (for an interrupt)


def end_active_sweep(status: str, reason: str) -> str | None:
    """End the running sweep's parent run (an interrupted sweep: KILLED); returns its run id, if any."""
    if not _active:
        return None
    sweep = _active.pop()
    sweep.end(status, reason)
    return sweep.parent_id


class SweepCallback(Callback):
    def __init__(self) -> None:
        self.client: MlflowClient | None = None
        self.parent_id: str | None = None
        self.experiment_id: str | None = None
        self.jobs = 0
        self.overrides = ""
        self.reused: list[str] = []          # runs of earlier sweeps kept by sweep.resume
        self.failed = 0
        self.total: int | None = None        # jobs the sweep will run (None: the sweeper did not say)
        self.started = time.monotonic()

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        hush_libraries(config.tracking.progress)
        uri = tracking.resolve_uri(config.tracking.uri)
        self.client = tracking.open_client(uri)   # refuses an unusable store first
        sweep_id = os.environ.get(names.SWEEP_NAME_ENV) or \
            f"{os.path.basename(os.path.normpath(config.hydra.sweep.dir))}-{uuid.uuid4().hex[:6]}"
        self.overrides = " ".join(redact_override(o) for o in config.hydra.overrides.task)
        tags = {names.ROLE: names.ROLE_SWEEP, names.SWEEP_ID: sweep_id,
                names.SWEEP_DIR: os.path.abspath(config.hydra.sweep.dir),
                names.OVERRIDES: self.overrides[:5000],
                names.MLFLOW_NOTE: f"evalkit sweep `{sweep_id}`: `evalkit -m {self.overrides}`, running"}
        adopted = os.environ.pop("MLFLOW_RUN_ID", None)
        if adopted:   # `mlflow run -e sweep` created the run: it becomes the parent
            self.parent_id = adopted
            tracking.set_tags(self.client, adopted, {"mlflow.runName": f"sweep-{sweep_id}", **tags})
            self.experiment_id = self.client.get_run(adopted).info.experiment_id
        else:
            exp = self.experiment_id = tracking.experiment_id(self.client, config.tracking.experiment)
            self.parent_id = self.client.create_run(exp, run_name=f"sweep-{sweep_id}", tags=tags).info.run_id
        os.environ[names.PARENT_RUN_ENV] = self.parent_id
        os.environ[names.SWEEP_ID_ENV] = sweep_id
        self.sweep_id, self.total, self.started = sweep_id, planned_jobs(config), time.monotonic()
        _active.append(self)

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        if self.parent_id is not None:    # the job's progress line says which job of the sweep it is
            os.environ[POSITION_ENV] = f"{self.jobs + 1}/{self.total}" if self.total else str(self.jobs + 1)

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: Any) -> None:
        os.environ.pop(POSITION_ENV, None)
        if self.parent_id is None:
            return
        self.jobs += 1
        result = job_return._return_value if job_return.status == JobStatus.COMPLETED else None
        if result is None or not getattr(result, "ok", False):
            self.failed += 1
        elif getattr(result, "reused", False):
            self.reused.append(result.run_id)
        say(config.tracking.progress,
            progress_line(self.sweep_id, self.jobs, self.total, self.failed, time.monotonic() - self.started))

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if self.parent_id is None:
            return
        if self in _active:
            _active.remove(self)
        self.end("FAILED" if self.failed else "FINISHED")

    def end(self, status: str, reason: str | None = None) -> None:
        tags = {names.JOBS: self.jobs, names.JOBS_FAILED: self.failed, names.FAILURE_REASON: reason,
                names.JOBS_REUSED: len(self.reused)}
        if self.reused:     # the list first: a reader that sees the count finds it
            self.client.log_text(self.parent_id, json.dumps(self.reused), names.REUSED_RUNS_ARTIFACT)
        tracking.set_tags(self.client, self.parent_id, tags)
        views = self._summarize(status, reason)
        self.client.set_terminated(self.parent_id, status)
        os.environ.pop(names.PARENT_RUN_ENV, None)
        os.environ.pop(names.SWEEP_ID_ENV, None)
        uri, exp = self.client.tracking_uri, self.experiment_id
        lines = [open_hint(f"sweep {self.sweep_id}", uri, exp, self.parent_id)]
        if "table" in views:
            lines.append(f"[evalkit]   its runs with the summary columns: {view_address(uri, exp, views['table'])}")
        if "charts" in views:
            lines.append(f"[evalkit]   its wrappers' curves side by side: "
                         f"{view_address(uri, exp, views['charts'], charts=True)}")
        print("\n".join(lines), file=sys.stderr, flush=True)

    def _summarize(self, status: str, reason: str | None) -> dict[str, str]:
        """The parent's summary and description, and the sweep's shared views ({} when the store failed)."""
        failed = f", {self.failed} failed" if self.failed else ""
        reused = f", {len(self.reused)} reused from earlier sweeps (FINISHED, same fingerprint)" if self.reused else ""
        headline = (f"evalkit sweep `{self.sweep_id}` ({status}{': ' + reason if reason else ''}): {self.jobs} "
                    f"jobs{failed}{reused} in {time.monotonic() - self.started:.0f} s, `evalkit -m {self.overrides}`")
        try:
            columns, trained = summarize(self.client, self.parent_id, headline, self.reused)
            return share_views(self.client, self.experiment_id, self.sweep_id, columns, charts=trained)
        except Exception as exc:  # noqa: BLE001 - a summary is a courtesy: the jobs' records are what count
            print(f"[evalkit] sweep {self.sweep_id}: no summary on its parent run ({tracking.describe_failure(exc)})",
                  file=sys.stderr, flush=True)
            return {}


def planned_jobs(config: DictConfig) -> int | None:
    """How many jobs the multirun's overrides make (Hydra's basic sweeper: the cartesian product); None when
    another sweeper decides."""
    try:
        from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
        from hydra.core.override_parser.overrides_parser import OverridesParser

        if "basic_sweeper" not in str(config.hydra.sweeper.get("_target_", "")).lower():
            return None
        parsed = OverridesParser.create().parse_overrides(list(config.hydra.overrides.task))
        return sum(len(batch) for batch in BasicSweeper.split_arguments(parsed, None))
    except Exception:  # noqa: BLE001 - progress is a courtesy: never a reason for a sweep to fail
        return None


def progress_line(sweep_id: str, done: int, total: int | None, failed: int, elapsed_s: float) -> str:
    """`[evalkit] sweep <id>: 3/12 jobs done (1 failed) in 25 s, about 75 s left`."""
    counted = f"{done}/{total}" if total else str(done)
    failures = f" ({failed} failed)" if failed else ""
    left = f", about {time_left(elapsed_s / done * (total - done))} left" if total and done < total else ""
    return f"[evalkit] sweep {sweep_id}: {counted} jobs done{failures} in {elapsed_s:.0f} s{left}"
