"""A Hydra callback that gives a multirun one MLflow parent run, with every job nested under it."""
from __future__ import annotations

import json
import os
import shutil
import sys
import time
import uuid
from typing import Any

from hydra.core.utils import JobReturn, JobStatus
from hydra.experimental.callback import Callback
from mlflow.tracking import MlflowClient
from omegaconf import DictConfig, OmegaConf

from evalkit import names
from evalkit.controller import tracking
from evalkit.controller.progress import POSITION_ENV, hush_libraries, say, time_left
from evalkit.controller.sweep import ledger
from evalkit.controller.sweep.ledger import entries as ledger_entries
from evalkit.controller.sweep.state import SweepState
from evalkit.controller.sweep.summary import summarize
from evalkit.controller.ui import open_hint, share_views, view_address
from evalkit.secrets import redact_override

_active: list["SweepCallback"] = []      # the sweep of this process, while it runs (for an interrupt)
_ended: list[int] = []                   # failed jobs of each sweep this process ended (its exit code)
_not_ended: list[str] = []               # sweeps whose parent run the store did not let this process end
_waiting: list[int] = []                 # of those failed jobs, the ones whose records still wait for the store


def sweep_ended() -> bool:
    """Whether this process ended a sweep (its jobs are counted in the sweep's ledger)."""
    return bool(_ended)


def failed_jobs() -> int:
    """Jobs that failed in the sweeps this process ended, whichever process ran them."""
    return sum(_ended)


def jobs_still_waiting() -> int:
    """Of `failed_jobs()`, those not recorded yet: their records still wait in their spool for the store."""
    return sum(_waiting)


def sweeps_not_ended() -> list[str]:
    """The sweeps whose parent run stays RUNNING until `evalkit-ship <sweep dir>` (said when it happened)."""
    return list(_not_ended)


def forget_ended() -> None:
    """Start counting afresh: a process that runs several sweeps one after another (`evalkit.cli.run_sweep`)
    reports each sweep's failures on their own."""
    for state in (_active, _ended, _not_ended, _waiting):
        state.clear()


def waiting_jobs(ledger: str) -> list[str]:
    """The run directories of the sweep's jobs whose records still wait for the store (not shipped since)."""
    filed = ledger_entries(ledger)
    shipped = {e["shipped"] for e in filed if e.get("shipped")}
    return [e["unshipped"] for e in filed if e.get("unshipped") and e["unshipped"] not in shipped]


def parallel_jobs(config: DictConfig) -> int:
    """How many jobs the sweep's launcher runs at once (1 for Hydra's basic launcher)."""
    launcher = config.hydra.get("launcher") or {}
    if str(launcher.get("_target_", "")).endswith("submitit_launcher.LocalLauncher"):   # starts every job at once
        return planned_jobs(config) or (os.cpu_count() or 1)
    n_jobs = launcher.get("n_jobs", 1) if "joblib" in str(launcher.get("_target_", "")).lower() else 1
    return (os.cpu_count() or 1) if n_jobs in (-1, None) else int(n_jobs)


def refuse_shared_timing(config: DictConfig) -> None:
    """Timed jobs (the performance probe, observe.profile=timing) time steps on cores they must not share: a
    launcher running jobs side by side makes their figures meaningless, so the sweep is refused before any."""
    timed = config.probe.name == "performance" or config.observe.profile == "timing"
    if timed and parallel_jobs(config) > 1:
        what = "probe=performance" if config.probe.name == "performance" else "observe.profile=timing"
        side_by_side = f"hydra.launcher.n_jobs={parallel_jobs(config)}" if "n_jobs" in config.hydra.launcher else \
            f"hydra/launcher=submitit_local ({parallel_jobs(config)} jobs at once)"
        print(f"evalkit: refused: a timed sweep ({what}) with {side_by_side}: its "
              "jobs would share the cores they time and their figures would not be comparable; run it with "
              "hydra.launcher.n_jobs=1 or Hydra's basic launcher", file=sys.stderr, flush=True)
        sys.exit(2)


def refuse_bad_overrides(config: DictConfig) -> None:
    """A job of the sweep that cannot be composed: one line, before the sweep's parent run exists."""
    from evalkit.hydra_errors import sweep_override_problem

    problem = sweep_override_problem(config)
    if problem:
        print(f"evalkit: bad override: {problem}", file=sys.stderr, flush=True)
        sys.exit(2)


def refuse_multinode(config: DictConfig) -> None:
    """A job over several nodes is one command per node (`controller/job/nodes.py`): a sweep's parent run would be
    recorded by every node, and its jobs' directories would differ between nodes. Refused before any."""
    nnodes = config.distributed.get("nnodes", 1)
    if isinstance(nnodes, int) and nnodes > 1:
        print(f"evalkit: refused: a sweep (-m) with distributed.nnodes={nnodes}: a job over several nodes runs as "
              "one command on each node (the same settings but distributed.node_rank); run each job of the sweep "
              "that way, without -m", file=sys.stderr, flush=True)
        sys.exit(2)


def refuse_unready_launcher(config: DictConfig) -> None:
    """A launcher that cannot start the jobs is refused before anything is recorded: a setting it requires left
    unset (`???`; a SLURM launcher's partition), or SLURM's commands missing here."""
    launcher = config.hydra.get("launcher") or {}
    choice = config.hydra.runtime.choices.get("hydra/launcher")
    slurm = str(launcher.get("_target_", "")).endswith("submitit_launcher.SlurmLauncher")
    missing = sorted(OmegaConf.missing_keys(launcher) | ({"partition"} if slurm and not launcher.partition else set()))
    problem = f"needs {', '.join(f'hydra.launcher.{key}=<value>' for key in missing)} on the command line" \
        if missing else None
    if not problem and slurm:
        absent = [cmd for cmd in ("sbatch", "srun") if shutil.which(cmd) is None]
        problem = f"submits to SLURM: {' and '.join(absent)} not found here (run it on the cluster)" if absent else None
    if problem:
        print(f"evalkit: refused: hydra/launcher={choice} {problem}", file=sys.stderr, flush=True)
        sys.exit(2)


class SweepNotEnded(RuntimeError):
    """The store failed while the sweep's parent run was being ended: the message says what to run later."""


def end_active_sweep(status: str, reason: str) -> "SweepCallback | None":
    """End the running sweep's parent run (an interrupted sweep: KILLED); returns the sweep, if any.
    Raises SweepNotEnded."""
    if not _active:
        return None
    sweep = _active.pop()
    sweep.end(status, reason)
    return sweep


class SweepCallback(Callback):
    def __init__(self) -> None:
        self.client: MlflowClient | None = None
        self.parent_id: str | None = None
        self.experiment_id: str | None = None
        self.jobs = 0
        self.ledger = ""
        self.sweep_dir = ""
        self.state: SweepState | None = None
        self.ship_uri: str | None = None     # evalkit-ship --tracking-uri: where its jobs are recorded too
        self.overrides = ""
        self.reused: list[str] = []          # runs of earlier sweeps kept by sweep.resume
        self.failed = 0
        self.total: int | None = None        # jobs the sweep will run (None: the sweeper did not say)
        self.side_by_side = 1                # jobs its launcher runs at once on this machine (their threads share it)
        self.started = time.monotonic()
        self.ended_wall: float | None = None  # the sweep's end where its parent is ended later (evalkit-ship)

    @classmethod
    def from_state(cls, state: SweepState, sweep_dir: str, uri: str | None = None) -> "SweepCallback":
        """The sweep its file describes, for `evalkit-ship <sweep dir>`: the store is opened (and checked) here."""
        fields, sweep = state.fields, cls()
        sweep.client, sweep.ship_uri = tracking.open_client(uri or fields["tracking_uri"]), uri
        sweep.parent_id, sweep.experiment_id, sweep.sweep_id = (fields["parent_run_id"], fields["experiment_id"],
                                                                fields["sweep_id"])
        sweep.overrides, sweep.total, sweep.state = fields["overrides"], fields["total"], state
        sweep.sweep_dir, sweep.ledger = sweep_dir, os.path.join(sweep_dir, fields["ledger"])
        last = max(t for t in (os.path.getmtime(state.path), ledger.last_change(sweep.ledger)) if t is not None)
        seconds = (fields.get("end") or {}).get("seconds", last - fields["started_wall"])
        sweep.started = time.monotonic() - seconds     # the summary's duration: the sweep's, not the outage's
        sweep.ended_wall = fields["started_wall"] + seconds   # its parent's end: the sweep's, not the ship's
        return sweep

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        refuse_bad_overrides(config)      # before anything is recorded
        refuse_shared_timing(config)
        refuse_unready_launcher(config)
        refuse_multinode(config)
        hush_libraries(config.tracking.progress)
        uri = tracking.resolve_uri(config.tracking.uri)
        try:
            self.client = tracking.open_client(uri)   # refuses an unusable store first
        except tracking.TrackingUnavailable as exc:  # once, for the sweep: Hydra would only warn and run every job
            print(f"evalkit: {exc}", file=sys.stderr, flush=True)
            sys.exit(1)
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
            tags = {**tracking.source_tags(uri, "evalkit -m"), **tags}
            self.parent_id = self.client.create_run(exp, run_name=f"sweep-{sweep_id}", tags=tags).info.run_id
        os.environ[names.PARENT_RUN_ENV] = self.parent_id
        os.environ[names.SWEEP_ID_ENV] = sweep_id
        self.sweep_id, self.total, self.started = sweep_id, planned_jobs(config), time.monotonic()
        parallel = parallel_jobs(config)
        self.side_by_side = min(parallel, self.total or parallel)
        sweep_dir = os.path.abspath(config.hydra.sweep.dir)
        os.makedirs(sweep_dir, exist_ok=True)
        self.ledger = ledger.path_for(sweep_dir, sweep_id)
        self.sweep_dir = sweep_dir
        self.state = SweepState.create(sweep_dir, sweep_id, parent_run_id=self.parent_id, tracking_uri=uri,
                                       experiment_id=self.experiment_id, overrides=self.overrides,
                                       total=self.total, ledger=os.path.basename(self.ledger))
        _active.append(self)
        if "submitit" in str(config.hydra.launcher.get("_target_", "")):
            say(config.tracking.progress, f"[evalkit] sweep {sweep_id}: its jobs run through submitit; each job's "
                f"output (progress, errors) goes to {sweep_dir}/.submitit/<job id>/<job id>_0_log.err")

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        if self.parent_id is not None:    # the job's progress line says which job of the sweep it is
            # A job in another process (joblib, submitit: on a cluster node the launch's environment may not
            # reach) takes the sweep's parent, id and store from this copy of the callback.
            os.environ.setdefault(names.PARENT_RUN_ENV, self.parent_id)
            os.environ.setdefault(names.SWEEP_ID_ENV, self.sweep_id)
            os.environ.setdefault(tracking.DEFAULT_URI_ENV, self.client.tracking_uri)
            os.environ[names.SIDE_BY_SIDE_ENV] = str(self.side_by_side)    # hardware.threads=0 shares the cores
            num = int(config.hydra.job.get("num") or 0) + 1
            os.environ[POSITION_ENV] = f"{num}/{self.total}" if self.total else str(num)

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: Any) -> None:
        """Each job's end goes to the sweep's ledger, an entry of its own whichever process or host files it
        (`ledger`): with a parallel launcher (joblib, submitit) this runs in the process that ran the job, where
        this object is a copy."""
        os.environ.pop(POSITION_ENV, None)
        os.environ.pop(names.SIDE_BY_SIDE_ENV, None)
        if self.parent_id is None:
            return
        result = job_return._return_value if job_return.status == JobStatus.COMPLETED else None
        ok = bool(result is not None and getattr(result, "ok", False))
        entry = {"run_id": getattr(result, "run_id", None), "ok": ok, "reused": ok and getattr(result, "reused", False),
                 "unshipped": getattr(result, "unshipped", None)}
        if not ok:   # said again by the process that ended the sweep when this one's output is out of sight
            error = job_return._return_value if job_return.status == JobStatus.FAILED else None
            entry.update(job=int(config.hydra.job.get("num") or 0) + 1, log=captured_log(),
                         overrides=" ".join(redact_override(o) for o in config.hydra.overrides.task),
                         reason=getattr(result, "reason", None) or (f"{type(error).__name__}: {error}" if error else
                                                                    "refused before it was recorded (see its output)"))
        ledger.add(self.ledger, entry)
        self.count()
        say(config.tracking.progress,
            progress_line(self.sweep_id, self.jobs, self.total, self.failed, time.monotonic() - self.started))

    def count(self) -> None:
        """jobs, failed and reused from the ledger: the jobs of every process of the sweep (a job whose records
        waited for the store counts as it ended when the sweep shipped them)."""
        lines = ledger_entries(self.ledger)
        shipped = {e["shipped"]: e for e in lines if e.get("shipped")}
        entries = [shipped.get(e.get("unshipped"), e) for e in lines if not e.get("shipped")]
        self.jobs, self.failed = len(entries), sum(not e["ok"] for e in entries)
        self.reused = [e["run_id"] for e in entries if e.get("reused")]

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if self.parent_id is None:
            return
        if self in _active:
            _active.remove(self)
        _waiting.append(self.ship_the_waiting(config.tracking.progress))
        self.count()
        self._say_captured_failures(config)
        try:
            self.end("FAILED" if self.failed else "FINISHED")
        except SweepNotEnded as exc:   # the jobs' records are what count, said above
            print(f"[evalkit] sweep {self.sweep_id}: {exc}", file=sys.stderr, flush=True)

    def ship_the_waiting(self, progress: str, left_behind: tuple[str, ...] = ()) -> int:
        """Jobs whose records waited in their spool for a store that did not answer, and `left_behind` (jobs a
        killed sweep never counted): shipped now if the store answers. Returns how many still wait."""
        waiting = waiting_jobs(self.ledger)
        still = 0
        for run_dir in [*waiting, *left_behind]:
            from evalkit.controller.job.ship import reship  # the controller's imports, only when needed

            try:
                with tracking.quiet_store_logs():
                    result = reship(run_dir, self.ship_uri)
            except Exception as exc:  # noqa: BLE001 - still no store (or the job still runs): said, counted
                print(f"[evalkit] sweep {self.sweep_id}: {run_dir} still waits for the store "
                      f"({tracking.describe_failure(exc)}): when it answers, run: evalkit-ship {self.sweep_dir}",
                      file=sys.stderr, flush=True)
                still += 1
                continue
            entry = {"run_id": result.run_id, "ok": result.ok, "reused": False}
            ledger.add(self.ledger, {"shipped": run_dir, **entry} if run_dir in waiting else
                       {**entry, "unshipped": None, "reason": result.reason})
            why = "the store answers again" if run_dir in waiting else "its job's process had stopped"
            say(progress, f"[evalkit] sweep {self.sweep_id}: {why}: {run_dir} recorded as run {result.run_id} "
                          f"({result.status})")
        return still

    def _say_captured_failures(self, config: DictConfig) -> None:
        """Jobs whose output went to files (submitit): their failures and the sweep's count, said here."""
        filed = ledger_entries(self.ledger)
        shipped = {e["shipped"] for e in filed if e.get("shipped")}
        captured = [e for e in filed if not e["ok"] and e.get("log") and e.get("unshipped") not in shipped]
        for e in sorted(captured, key=lambda e: e.get("job") or 0):
            job = f"{e['job']}/{self.total}" if self.total else str(e["job"])
            print(f"evalkit: job {job} ({e['overrides']}) failed: {e['reason']}; its output: {e['log']}",
                  file=sys.stderr, flush=True)
        if captured:
            say(config.tracking.progress,
                progress_line(self.sweep_id, self.jobs, self.total, self.failed, time.monotonic() - self.started))

    def end(self, status: str, reason: str | None = None) -> None:
        """End the parent run with the ledger's counts. Raises SweepNotEnded when the store fails; the sweep's
        file then keeps the end for `evalkit-ship <sweep dir>`."""
        self.count()
        _ended.append(self.failed)
        self.state.update(end={"status": status, "reason": reason, "seconds": time.monotonic() - self.started})
        try:
            self._end_parent(status, reason)
        except Exception as exc:  # noqa: BLE001 - MLflow raises many types; each means the store failed
            _not_ended.append(self.sweep_id)
            raise SweepNotEnded(
                f"its parent run {self.parent_id} could not be ended ({tracking.describe_failure(exc)}); it stays "
                f"RUNNING until the store answers: then run: evalkit-ship {self.sweep_dir}") from None
        self.state.update(ended=True)
        self.state.release()

    def _end_parent(self, status: str, reason: str | None) -> None:
        tags = {names.JOBS: self.jobs, names.JOBS_FAILED: self.failed, names.FAILURE_REASON: reason,
                names.JOBS_REUSED: len(self.reused)}
        if self.reused:     # the list first: a reader that sees the count finds it
            self.client.log_text(self.parent_id, json.dumps(self.reused), names.REUSED_RUNS_ARTIFACT)
        tracking.set_tags(self.client, self.parent_id, tags)
        views = self._summarize(status, reason)
        ended = self.ended_wall
        self.client.set_terminated(self.parent_id, status, end_time=int(ended * 1000) if ended else None)
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


def captured_log() -> str | None:
    """The file this job's stderr goes to when a launcher captures it (a submitit job), else None."""
    if not os.environ.get("SUBMITIT_EXECUTOR"):
        return None
    try:
        import submitit

        paths = submitit.JobEnvironment().paths
        return str(paths.stderr if paths.stderr.exists() else paths.stdout)
    except Exception:  # noqa: BLE001 - a pointer to the log is a courtesy
        return None


def planned_jobs(config: DictConfig) -> int | None:
    """How many jobs the multirun's overrides make (Hydra's basic sweeper: the cartesian product); None when
    another sweeper decides."""
    from evalkit.hydra_errors import basic_sweeper_jobs

    try:
        jobs = basic_sweeper_jobs(config)
    except Exception:  # noqa: BLE001 - progress is a courtesy: never a reason for a sweep to fail
        return None
    return None if jobs is None else len(jobs)


def progress_line(sweep_id: str, done: int, total: int | None, failed: int, elapsed_s: float) -> str:
    """`[evalkit] sweep <id>: 3/12 jobs done (1 failed) in 25 s, about 75 s left`."""
    counted = f"{done}/{total}" if total else str(done)
    failures = f" ({failed} failed)" if failed else ""
    left = f", about {time_left(elapsed_s / done * (total - done))} left" if total and done < total else ""
    return f"[evalkit] sweep {sweep_id}: {counted} jobs done{failures} in {elapsed_s:.0f} s{left}"
