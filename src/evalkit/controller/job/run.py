"""The controller of one job: one MLflow run around one group of worker processes.

It never imports the wrapper under test. It records the run before launching (so a crash leaves a
run), ships the workers' spool while they train (progress on the console), then logs the summaries
and artifacts and ends the run FINISHED or FAILED with the reason.
"""
from __future__ import annotations

import contextlib
import dataclasses
import glob
import json
import os
import signal
import sys
import tempfile
import time

from mlflow.tracking import MlflowClient
from omegaconf import DictConfig, OmegaConf

from evalkit import launchers, names
from evalkit.caliber import caliber_tag
from evalkit.config import config_warnings
from evalkit.contract.adapter_class import adapter_class_problem
from evalkit.controller import tracking
from evalkit.controller.interrupt import Interrupted, InterruptedAgain, StopRequest, ended_status, interruption
from evalkit.controller.job import nodes, phases, rundir
from evalkit.controller.job.environment import (
    cuda_devices,
    environment_lock,
    git_commit,
    hardware_description,
    runs_on_cuda,
)
from evalkit.controller.job.fingerprint import fingerprint, finished_run, stale_versions, version_tags
from evalkit.controller.job.result import JobResult
from evalkit.controller.job.resume_check import check_resume, resume_tags
from evalkit.controller.job.shipper import Shipper
from evalkit.controller.job.slurm_limit import time_limit_note
from evalkit.controller.job.system_metrics import SystemSampler
from evalkit.controller.launch.workers import Outcome, WorkerGroup
from evalkit.controller.progress import JobProgress
from evalkit.controller.ui import job_description, log_datasets, trainer_label
from evalkit.controller.writable import space_problem
from evalkit.cpus import worker_threads
from evalkit.envs.select import env_problem
from evalkit.envs.store import EnvUnavailable, ready
from evalkit.secrets import redact
from evalkit.spool import read_json
from evalkit.text import one_line
from evalkit.trainers import cited_version, not_installed


def caliber(cfg: DictConfig) -> str:
    """A job's caliber tag: hardware, threads, batch per device, accumulation, precision, world size, warm-up."""
    return caliber_tag(hw=cfg.hardware.name, thr=cfg.hardware.threads, bs=cfg.train.batch_size,
                       accum=cfg.train.grad_accum, prec=cfg.precision.name, ws=cfg.distributed.world_size,
                       warmup=cfg.observe.warmup_steps)


def preflight(cfg: DictConfig) -> str | None:
    """A reason the job cannot run at all (checked before launch), or None."""
    trainer = cfg.trainer
    # in a wrapper's environment (trainer.env) the wrapper is the environment's: its worker checks the modules
    missing = env_problem(trainer) if trainer.get("env") else not_installed(trainer)
    if missing:
        return missing
    devices = cuda_devices() if cfg.hardware.device != "cpu" else 0
    if cfg.hardware.device == "cuda" and not devices:
        return "hardware=cuda but no CUDA device is visible: use hardware=cpu or hardware=auto"
    local = cfg.distributed.world_size // max(1, cfg.distributed.nnodes)    # this node's ranks
    if devices and devices < local:
        per_node = f" over distributed.nnodes={cfg.distributed.nnodes} ({local} on this node)" \
            if cfg.distributed.nnodes > 1 else ""
        return (f"distributed.world_size={cfg.distributed.world_size}{per_node} on hardware={cfg.hardware.name} "
                f"needs one CUDA device per rank, {devices} visible (NCCL refuses two ranks on one "
                "device): lower distributed.world_size or use hardware=cpu")
    return adapter_class_problem(trainer._target_) or check_resume(cfg)


def run_tags(cfg: DictConfig, sweep_id: str | None, role: str = names.ROLE_JOB) -> dict[str, str]:
    return {
        names.ROLE: role, names.TRAINER: cfg.trainer.name, names.MODE: cfg.trainer.mode,
        names.TASK: cfg.task.name, names.SEED: cfg.seed, names.REPEAT: cfg.repeat,
        names.CALIBER: caliber(cfg), names.PRECISION: cfg.precision.name,
        names.REQUESTED_PRECISION: cfg.precision.name,
        names.WORLD_SIZE: cfg.distributed.world_size, names.HARDWARE: cfg.hardware.name,
        names.SWEEP_ID: sweep_id, names.VAL_METRIC_MARGIN: cfg.task.metric_margin,
        names.FINGERPRINT: fingerprint(cfg), names.TRAINER_ENV: cfg.trainer.get("env"),
        names.LAUNCH: launchers.chosen(cfg.trainer.get("launch"), cfg.distributed.world_size, runs_on_cuda(cfg)),
        names.MLFLOW_GIT_COMMIT: git_commit(os.path.dirname(os.path.abspath(__file__))),
        names.QUICK_START_VERSION: cited_version(cfg.trainer) if cfg.trainer.mode == "defaults" else None,
        **version_tags(cfg),
    }


class Controller:
    POLL_S = 0.1    # how often the controller looks at its workers (records ship every tracking.flush_interval_s)

    def __init__(self, cfg: DictConfig, run_dir: str, uri: str | None = None, run_id: str | None = None,
                 stop: StopRequest | None = None, role: str = names.ROLE_JOB, may_defer: bool = False):
        """`may_defer`: a tracking server that does not answer does not stop the job: it trains, its records
        stay in the spool, and the run is recorded when the server answers again (a sweep's job: the sweep's
        parent run proved the address right)."""
        self.cfg, self.run_dir, self.role = cfg, os.path.abspath(run_dir), role
        self.stop = stop or StopRequest()
        self.uri = uri or tracking.resolve_uri(cfg.tracking.uri)
        self.may_defer = may_defer and tracking.is_server(self.uri)
        self.unrecorded: str | None = None    # why the run is not recorded yet (the store's failure), else None
        self.started_wall = time.time()       # the run's start time, also when it is recorded later
        self.ended_wall: float | None = None  # its end, when recorded later than it happened (evalkit-ship)
        try:
            self.client = tracking.open_client(self.uri)
        except tracking.TrackingUnavailable as exc:
            if not self.may_defer:
                raise
            self.client, self.unrecorded = MlflowClient(self.uri), str(exc)
        self.run_id = run_id
        self.run_recorded = run_id is not None   # created, with its params and configuration logged
        self.run_dir_tagged = False              # the run's folder tags (RUN_DIR, CHECKPOINT_DIR) are set
        self.workers: WorkerGroup | None = None
        self.timed_out = False   # the workers were stopped past train.time_limit_s
        self.winding_down: str | None = None  # the interrupt that ended the run before its wind-down, tagged so
        self.started: float | None = None     # when start_run recorded the run (monotonic)
        self.sampler: SystemSampler | None = None
        self.progress: JobProgress | None = None
        self.extra_spec: dict = {}            # more for the worker's job spec (a timed job's turn table)

    def start_run(self) -> str:
        exp = tracking.experiment_id(self.client, self.cfg.tracking.experiment)
        sweep_id = os.environ.get(names.SWEEP_ID_ENV)
        tags = run_tags(self.cfg, sweep_id, self.role)
        tags.update(resume_tags(self.cfg))
        warnings = config_warnings(self.cfg)
        if warnings:
            tags[names.CONFIG_WARNINGS] = "; ".join(warnings)
        if os.environ.get(names.PARENT_RUN_ENV):
            tags[names.MLFLOW_PARENT_RUN] = os.environ[names.PARENT_RUN_ENV]
        tags[names.MLFLOW_NOTE] = job_description(self.cfg, "running")
        self.started = self.started or time.monotonic()
        cfg = self.cfg
        name = cfg.run_name or (f"{trainer_label(cfg.trainer)}-{cfg.task.name}-{cfg.precision.name}"
                                f"-ws{cfg.distributed.world_size}-s{cfg.seed}")
        adopted = os.environ.pop("MLFLOW_RUN_ID", None) \
            if not os.environ.get(names.PARENT_RUN_ENV) and self.role == names.ROLE_JOB else None
        if adopted:   # `mlflow run` created the run for this entry point: record into it
            self.run_id = adopted
            tracking.set_tags(self.client, adopted, {"mlflow.runName": name, **tags})
        elif self.run_id is None:   # else a try that failed half-way created it: the rest is idempotent
            tags = {**tracking.source_tags(self.uri, "evalkit"), **tags}   # `mlflow run` set them on an adopted run
            run = self.client.create_run(exp, run_name=name, start_time=int(self.started_wall * 1000),
                                         tags={k: str(v) for k, v in tags.items() if v is not None})
            self.run_id = run.info.run_id
        resolved = OmegaConf.to_container(self.cfg, resolve=True)
        resolved["tracking"]["uri"] = tracking.display_uri(self.uri)   # the store actually used, not the request
        tracking.log_params(self.client, self.run_id, tracking.flatten(resolved))
        self._log_text(OmegaConf.to_yaml(OmegaConf.create(redact(resolved))), names.CONFIG_ARTIFACT_DIR,
                       names.RESOLVED_CONFIG_FILE)
        self._log_environment()
        self._log_text(json.dumps(hardware_description(), indent=1), names.ENV_ARTIFACT_DIR, "hardware.json")
        self.run_recorded = True
        return self.run_id

    def _log_environment(self) -> None:
        """The environment lock (in a wrapper's environment, `trainer.env`: what its workers import, the
        environment's own distributions first) and that environment's manifest. An environment that cannot run
        the workers fails the job in `preflight`, after the run is recorded with evalkit's own lock."""
        try:
            env = ready(self.cfg.trainer.env) if self.cfg.trainer.get("env") else None
        except EnvUnavailable:
            env = None
        self._log_text(environment_lock(first=[str(env.site_packages)] if env else []), names.ENV_ARTIFACT_DIR,
                       "lock.txt")
        if env:
            self._log_text(env.manifest_path.read_text(), names.ENV_ARTIFACT_DIR, names.ENV_MANIFEST_FILE)

    def record_when_possible(self) -> bool:
        """Whether the run is recorded; when it is not yet (the server did not answer), one quick try: the
        server's health first (seconds, where MLflow's own retries take minutes), then the run's start."""
        if self.run_recorded:
            return True
        try:
            with tracking.quiet_store_logs():
                tracking.check_reachable(self.uri)
                self.start_run()
                if os.path.exists(os.path.join(self.run_dir, names.RUN_FILE)):   # training has started
                    self._record_run_dir()
        except Exception as exc:  # noqa: BLE001 - any store failure means the same: not yet
            self.unrecorded = str(exc) if isinstance(exc, tracking.TrackingUnavailable) \
                else tracking.describe_failure(exc)
            return False
        if self.unrecorded:
            print(f"[evalkit] the tracking store {tracking.display_uri(self.uri)} answers again: run {self.run_id} "
                  "recorded, the spooled records follow", file=sys.stderr, flush=True)
        self.unrecorded = None
        return True

    @property
    def ckpt_dir(self) -> str:
        return os.path.join(self.run_dir, names.CHECKPOINTS_DIR)

    def _record_run_dir(self) -> None:
        """Where the job's files are: run.json for evalkit-ship (with the run's identity, also before the run
        could be recorded: evalkit-ship then records it), and tags on the run."""
        self._write_run_file()
        self._tag_run_dir()

    def _write_run_file(self) -> None:
        with open(os.path.join(self.run_dir, names.RUN_FILE), "w") as fh:
            json.dump({"run_id": self.run_id, "tracking_uri": self.uri, "started_wall": self.started_wall,
                       "role": self.role, "parent_run_id": os.environ.get(names.PARENT_RUN_ENV),
                       "sweep_id": os.environ.get(names.SWEEP_ID_ENV)}, fh)

    def _tag_run_dir(self) -> None:
        if self.run_id is not None and not self.run_dir_tagged:
            tracking.set_tags(self.client, self.run_id, {names.RUN_DIR: self.run_dir,
                                                         names.CHECKPOINT_DIR: self.ckpt_dir})
            self.run_dir_tagged = True

    def _log_text(self, text: str, artifact_dir: str, name: str) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, name)
            with open(path, "w") as fh:
                fh.write(text)
            self.client.log_artifact(self.run_id, path, artifact_dir)

    def fail(self, reason: str, status: str = "FAILED") -> JobResult:
        tracking.set_tags(self.client, self.run_id, {names.FAILURE_REASON: one_line(reason),
                                                     names.MLFLOW_NOTE: self._note(status, one_line(reason))})
        self.client.set_terminated(self.run_id, status, end_time=self._end_time())
        self._wound_down()
        return JobResult(self.run_id, False, reason, status)

    def _wound_down(self) -> None:
        """Every record shipped and the run ended: a run ended before its wind-down loses the tag that says so."""
        if self.winding_down:
            self.client.delete_tag(self.run_id, names.WINDING_DOWN)
            self.winding_down = None

    def _end_time(self) -> int | None:
        """The run's end for MLflow (ms): when it happened, where it is recorded later (evalkit-ship); else now."""
        return int(self.ended_wall * 1000) if self.ended_wall is not None else None

    def _note(self, status: str, detail: str = "") -> str:
        """The run's one-line description: how it ended, after how long (this controller's watch, or the recorded
        start and end of a job shipped later)."""
        seconds = self.ended_wall - self.started_wall if self.ended_wall is not None else \
            time.monotonic() - self.started if self.started is not None else None
        took = f" after {seconds:.0f} s" if seconds is not None else ""
        return job_description(self.cfg, f"{status}{took}" + (f": {detail}" if detail else ""))

    def train(self) -> JobResult:
        """Start the workers, watch them to their end, record the run."""
        return self.conclude(self.launch())

    def launch(self) -> Shipper:
        """Write the job's spec (with `extra_spec`: what the worker also needs, e.g. its turn table), start the
        workers and what watches them; the shipper that `conclude` ships with."""
        spool_dir = os.path.join(self.run_dir, names.SPOOL_DIR)
        os.makedirs(spool_dir, exist_ok=True)
        spec = {"config": OmegaConf.to_container(self.cfg, resolve=True), "spool_dir": spool_dir,
                "ckpt_dir": self.ckpt_dir,
                "resume_from": os.path.abspath(self.cfg.resume_from) if self.cfg.resume_from else None,
                **self.extra_spec}
        with open(os.path.join(self.run_dir, names.JOB_FILE), "w") as fh:
            json.dump(spec, fh)
        world = self.cfg.distributed.world_size
        self._write_run_file()
        # The store may fail just now: training goes on, the shipper meets the failure and says so once, and the
        # tags are set again when the run ends (ship_and_finish).
        with contextlib.suppress(Exception), tracking.quiet_store_logs():
            self._tag_run_dir()
        shipper = Shipper(self.client, self.run_id, spool_dir, world, self.cfg.tracking.batch_size,
                          val_dedup=bool(self.cfg.trainer.get("val_dedup")))
        phases.mark("workers_start", self.run_dir)
        self.workers = nodes.start_ranks(self.cfg, self.run_dir, self.run_id, cuda=runs_on_cuda(self.cfg),
                                         threads=worker_threads(self.cfg),   # several nodes: every node's ranks
                                         pin_at_turn="turns" in self.extra_spec)
        self.sampler = SystemSampler(self.cfg.tracking.system_metrics_interval_s).start()
        cfg = self.cfg
        self.progress = JobProgress(cfg.tracking.progress, f"{trainer_label(cfg.trainer)} {cfg.task.name} "
                                                           f"seed={cfg.seed}",
                                    cfg.train.max_steps, cfg.tracking.progress_interval_s)
        return shipper

    def conclude(self, shipper: Shipper) -> JobResult:
        """Watch the launched workers to their end, then ship everything and end the run."""
        try:
            self._watch(shipper)
            phases.mark("workers_ended", self.run_dir)
        finally:
            self.sampler.stop()
        outcome = self.workers.outcome(self.stop.signame)
        if self.timed_out:
            outcome = dataclasses.replace(outcome, time_limit_s=float(self.cfg.train.time_limit_s))
        try:
            with open(os.path.join(self.run_dir, names.EXIT_CODES_FILE), "w") as fh:
                json.dump(dataclasses.asdict(outcome), fh)
        except OSError:   # a full disk: the outcome is in hand (evalkit-ship, later, reads it from the spool)
            pass
        if not outcome.interrupted:
            result = self.ship_and_finish(shipper, outcome)
            phases.mark("run_finished", self.run_dir)
            self.progress.end(result.status + (f" ({one_line(result.reason, 120)})" if result.reason else ""))
            return result
        try:
            result = self.ship_and_finish(shipper, outcome)
        except tracking.TrackingUnavailable as exc:
            raise Interrupted(outcome.interrupted, f"interrupted by {outcome.interrupted}; {exc}") from None
        raise Interrupted(outcome.interrupted, f"{interruption(outcome.interrupted)}: run {result.run_id} ended "
                                               f"{result.status} ({result.reason})")

    def ship_and_finish(self, shipper: Shipper, outcome: Outcome | None) -> JobResult:
        """Final shipping and the run's end; a tracking outage here loses nothing (the spool stays)."""
        try:
            with tracking.quiet_store_logs():   # the failure is reported once, below, not per call by MLflow
                if not self.record_when_possible():
                    raise tracking.TrackingUnavailable(self.unrecorded)
                shipper.run_id = self.run_id
                shipper.poll(final=True)
                if shipper.last_error:
                    raise RuntimeError(shipper.last_error)
                self._tag_run_dir()     # when the store failed as training started (or evalkit-ship records it)
                self._ship_system_metrics()
                return self._finish(shipper, os.path.join(self.run_dir, names.SPOOL_DIR), outcome)
        except Exception as exc:  # noqa: BLE001 - any store failure means the same to the user
            what = f"run {self.run_id}" if self.run_id else f"the run of {self.run_dir} (not created yet)"
            raise tracking.TrackingUnavailable(
                f"the tracking store {tracking.display_uri(self.uri)} failed while recording {what} "
                f"({shipper.last_error or tracking.describe_failure(exc)}); every record is kept in "
                f"{self.run_dir}/spool: when the store answers again, run: evalkit-ship {self.run_dir}") from exc

    def _watch(self, shipper: Shipper) -> list[int]:
        interval = self.cfg.tracking.flush_interval_s
        last_ship = time.monotonic()
        # A timed job's records ship when its workers have ended: the controller's store writes would compete
        # with the steps being timed for the same cores.
        timed = self.cfg.observe.profile == "timing"
        limit = self.cfg.train.get("time_limit_s")
        deadline = time.monotonic() + float(limit) if limit else None
        while (codes := self.workers.poll()) is None:
            if self.stop.signame or (deadline is not None and time.monotonic() > deadline):
                self.timed_out = not self.stop.signame
                if self.stop.signame and not shipper.last_error:
                    self._end_before_winding_down(self.stop.signame)
                self.workers.stop()
                continue
            time.sleep(min(interval, self.POLL_S))   # the workers' end is seen within POLL_S, not a whole interval
            if time.monotonic() - last_ship < interval:
                continue
            last_ship = time.monotonic()
            if timed:
                self.progress.update(None, None, " (timed: its records ship when it ends)")
                continue
            if self.record_when_possible():
                shipper.run_id = self.run_id
            shipper.poll()
            if not shipper.last_error:
                # kept for the next try; the shipper reports a failing store, once, not MLflow per call
                with contextlib.suppress(Exception), tracking.quiet_store_logs():
                    self._ship_system_metrics()
            self._progress(shipper)
        return codes

    def _end_before_winding_down(self, signame: str) -> None:
        """End the run as the interrupt ends it before the wind-down (the ranks stopped with grace, the rest of the
        spool shipped), tagged `evalkit.winding_down`: a controller killed during it (SLURM sends SIGKILL KillWait
        after scancel's SIGTERM) leaves no run RUNNING, and evalkit-ship still completes a run so tagged. The
        controller's own end removes the tag."""
        if self.run_id is None or self.winding_down:
            return
        self.winding_down = signame
        reason = (f"{interruption(signame)}; the controller was stopped before it had shipped every record: "
                  f"evalkit-ship {self.run_dir} ships the rest")
        with contextlib.suppress(Exception), tracking.quiet_store_logs():
            tracking.set_tags(self.client, self.run_id, {names.WINDING_DOWN: signame,
                                                         names.FAILURE_REASON: reason,
                                                         names.MLFLOW_NOTE: self._note(ended_status(signame), reason)})
            self.client.set_terminated(self.run_id, ended_status(signame))

    def _ship_system_metrics(self) -> None:
        """The system metrics sampled so far; kept for the next try when the store fails."""
        if self.sampler is None or self.run_id is None:
            return
        points = self.sampler.take()
        try:
            tracking.log_metrics(self.client, self.run_id, points)
        except Exception:
            self.sampler.put_back(points)
            raise

    def _progress(self, shipper: Shipper) -> None:
        last = shipper.steps[-1] if shipper.steps else {}
        warn = " (tracking store failing: records kept in the spool)" if shipper.last_error or self.unrecorded \
            else ""
        self.progress.update(last.get("step"), last.get("loss"), warn)

    def _finish(self, shipper: Shipper, spool_dir: str, outcome: Outcome | None) -> JobResult:
        client, run_id, world = self.client, self.run_id, self.cfg.distributed.world_size
        summaries = [read_json(spool_dir, names.summary_file(r)) for r in range(world)]
        self._log_summaries(summaries)
        versions = read_json(spool_dir, names.VERSIONS_FILE, {})
        tags = {names.VERSION_PREFIX + k: v for k, v in versions.items()}
        tags[names.WRAPPER_VERSION] = next((v for k, v in versions.items() if k != "torch"), versions.get("torch"))
        tags[names.TORCH_VERSION] = versions.get("torch")
        tags.update(observed_precision_tags(self.cfg.precision.name, summaries[0]))
        if tags.get(names.PRECISION_MISMATCH):
            print(f"[evalkit] warning: {self.cfg.trainer.name} ran another precision than asked: "
                  f"{tags[names.PRECISION_MISMATCH]}", file=sys.stderr, flush=True)
        task = read_json(spool_dir, names.TASK_INFO_FILE, {})
        if task:
            tags[names.VAL_METRIC] = task["metric"]
            tags[names.VAL_METRIC_HIGHER_IS_BETTER] = str(task["higher_is_better"]).lower()
            tags[names.VAL_METRIC_SCALE] = task.get("scale", "relative")
        if task.get("datasets"):
            log_datasets(client, run_id, task["datasets"])
        tracking.set_tags(client, run_id, tags)
        metric_name = task.get("metric") or next((v["metric"] for v in shipper.validation_rows()), "metric")
        with tempfile.TemporaryDirectory(prefix="evalkit-records-") as elsewhere:
            try:
                paths = shipper.write_csvs(os.path.join(self.run_dir, names.RECORDS_DIR), metric_name)
            except OSError:   # the run directory's disk is full: the CSVs are written elsewhere to be logged
                paths = shipper.write_csvs(elsewhere, metric_name)
            for path in paths:
                client.log_artifact(run_id, path, names.RECORDS_DIR)
        for name in ([names.EFFECTIVE_CONFIG_FILE, names.VERSIONS_FILE, names.CALL_PROFILE_FILE]
                     + [names.summary_file(r) for r in range(world)] + [names.launch_file(r) for r in range(world)]):
            if os.path.exists(os.path.join(spool_dir, name)):
                client.log_artifact(run_id, os.path.join(spool_dir, name), names.SPOOL_ARTIFACT_DIR)
        for path in sorted(glob.glob(os.path.join(self.run_dir, names.WORKER_LOG_GLOB))):
            client.log_artifact(run_id, path, names.LOGS_ARTIFACT_DIR)
        errors = {r: os.path.join(spool_dir, names.error_file(r)) for r in range(world)}
        errors = {r: p for r, p in errors.items() if os.path.exists(p)}
        for path in errors.values():
            client.log_artifact(run_id, path, names.FAILURE_ARTIFACT_DIR)
        last = shipper.steps[-1]["step"] if shipper.steps else 0
        if outcome is None:       # the controller died before the workers ended (evalkit-ship after a SIGKILL)
            outcome = outcome_from_spool(spool_dir, world, errors)
            if outcome is None:
                return self.fail(f"the controller stopped before its workers ended (killed?); the records up to "
                                 f"step {last} are kept", status="KILLED")
        if outcome.interrupted:
            return self.fail(f"{interruption(outcome.interrupted)} after step {last}; the records up to it are "
                             "kept", status=ended_status(outcome.interrupted))
        if outcome.time_limit_s:
            return self.fail(f"stopped past its time limit of {outcome.time_limit_s:g} s (train.time_limit_s) after "
                             f"step {last} of {self.cfg.train.max_steps}; the records up to it are kept: the wrapper "
                             "never reached max_steps in time (one that never completes an accumulation window, "
                             "e.g. where an epoch is shorter than one, runs on forever)")
        if all(c == 0 for c in outcome.codes):
            loss = f", final train loss {shipper.steps[-1]['loss']:.4g}" \
                if shipper.steps and shipper.steps[-1].get("loss") is not None else ""
            ended_by = (summaries[0] or {}).get("ended_by")
            early = f" of {self.cfg.train.max_steps}, stopped early by {ended_by}" \
                if ended_by and last < self.cfg.train.max_steps else ""
            tags = {names.MLFLOW_NOTE: self._note("FINISHED", f"{last} steps{early}{loss}")}
            tracking.set_tags(client, run_id, {**tags, **({names.ENDED_BY: ended_by} if early else {})})
            client.set_terminated(run_id, "FINISHED", end_time=self._end_time())
            self._wound_down()
            return JobResult(run_id, True, status="FINISHED")
        reason = failure_reason(outcome, errors)
        full = space_problem(spool_dir) if reason.startswith("worker exited with codes") else None
        if full:          # the worker could not even write its error: the disk says why
            reason = (f"the disk is full ({full}): the worker could write no more records and no error; every step "
                      f"up to {last} is recorded: free space there and run the job again")
        return self.fail(reason)

    def _log_summaries(self, summaries: list[dict | None]) -> None:
        points = []
        for rank, summary in enumerate(summaries):
            if summary and summary.get("peak_mem_bytes") is not None:
                points.append(tracking.metric(names.perf_peak_mem_rank(rank), summary["peak_mem_bytes"], 0))
        peaks = [s["peak_mem_bytes"] for s in summaries if s and s.get("peak_mem_bytes") is not None]
        if peaks:
            points.append(tracking.metric(names.PERF_PEAK_MEM, max(peaks), 0))
        # Largest over ranks. peak_rss_growth: what training added over the process's footprint at the window's
        # start (CPU); nvml_used: the device memory NVML saw in use, every allocator included (CUDA);
        # import_rss: the process after the wrapper's imports, before the task (CPU: peak_mem is above it).
        for key, name in (("peak_rss_growth_bytes", names.PERF_PEAK_RSS_GROWTH),
                          ("nvml_used_bytes", names.PERF_NVML_PEAK), ("import_rss_bytes", names.PERF_IMPORT_RSS)):
            values = [s[key] for s in summaries if s and s.get(key) is not None]
            if values:
                points.append(tracking.metric(name, max(values), 0))
        head = summaries[0] or {}
        for key in ("samples_per_s", "steps_per_s", "step_time_median_s", "window_steps"):
            if head.get(key) is not None:
                value = head[key] * (self.cfg.distributed.world_size if key == "samples_per_s" else 1)
                points.append(tracking.metric(f"perf/{key}", value, 0))
        tracking.log_metrics(self.client, self.run_id, points)
        methods = {names.THROUGHPUT_METHOD: head.get("throughput_method"),
                   names.PEAK_MEM_METHOD: head.get("peak_mem_method")}
        tracking.set_tags(self.client, self.run_id, methods)

def observed_precision_tags(requested: str, summary: dict | None) -> dict[str, str]:
    """Tag the precision the observers saw next to the one requested; flag a silent substitution."""
    dtypes = (summary or {}).get("observed_dtypes") or {}
    if not dtypes:
        return {}
    observed = max(dtypes, key=dtypes.get)
    expected = names.PRECISION_DTYPES.get(requested)
    tags = {names.OBSERVED_PRECISION: observed, names.OBSERVED_DTYPES: json.dumps(dtypes)}
    if expected and observed != expected:
        tags[names.PRECISION_MISMATCH] = f"requested {requested} ({expected}), observed {observed}"
    return tags


def failure_reason(outcome: Outcome, error_files: dict[int, str]) -> str:
    """The cause, from the rank that failed first: its error, or the signal that killed it. Ranks evalkit
    stopped itself come last: their errors are symptoms of the first failure."""
    codes, world = outcome.codes, len(outcome.codes)
    if outcome.node_problem:     # several nodes: one node's ranks are unaccounted for, or it could not run them
        first = outcome.first_failed
        if first is None or first in outcome.stopped or codes[first] in (0, None):
            return f"{outcome.node_problem} (exit codes {codes})"
        return f"{failure_reason(dataclasses.replace(outcome, node_problem=None), error_files)}; {outcome.node_problem}"
    first = [outcome.first_failed] if outcome.first_failed is not None else []
    order = first + [r for r in range(world) if r not in first and r not in outcome.stopped] + outcome.stopped
    who = (lambda r: f"rank {r} ") if world > 1 else (lambda r: "worker ")
    for rank in order:
        code = codes[rank]
        if code in (0, None):
            continue
        cause = ""
        if rank in error_files:
            with open(error_files[rank]) as fh:
                cause = fh.readline().strip()
        if not cause and code < 0:
            cause = f"{who(rank)}killed by {signal.Signals(-code).name}"
            limit = time_limit_note()
            cause += f": {limit}" if limit else ""
        elif cause and world > 1:
            cause = f"rank {rank}: {cause}"
        if cause:
            return cause + (f" (exit codes {codes})" if world > 1 else "")
    return f"worker exited with codes {codes}"


def outcome_from_spool(spool_dir: str, world: int, errors: dict[int, str]) -> Outcome | None:
    """The workers' end read from what they left, when no exit code was recorded: an error file means that
    rank failed, a summary means it finished; None when neither tells (the workers were killed)."""
    codes = []
    for rank in range(world):
        if rank in errors:
            codes.append(1)
        elif os.path.exists(os.path.join(spool_dir, names.summary_file(rank))):
            codes.append(0)
        else:
            return None
    return Outcome(codes)


def reuse_finished(cfg: DictConfig, role: str) -> JobResult | None:
    """With `sweep.resume=true`: the FINISHED run of this very job (same fingerprint: same config, same versions)
    when the store has one; a FINISHED run of its config at other versions is run again, and said."""
    if not cfg.sweep.resume:
        return None
    try:
        client = tracking.open_client(tracking.resolve_uri(cfg.tracking.uri))
    except tracking.TrackingUnavailable:
        if not os.environ.get(names.PARENT_RUN_ENV):
            raise
        print("[evalkit] sweep.resume: the tracking store does not answer, so whether this job already FINISHED "
              "cannot be read: it runs", file=sys.stderr, flush=True)
        return None
    exp = tracking.experiment_id(client, cfg.tracking.experiment)
    run_id = finished_run(client, exp, fingerprint(cfg), role)
    if run_id is None:
        stale = stale_versions(client, exp, cfg, role)
        if stale is not None:
            print(f"[evalkit] sweep.resume: run {stale[0]} was recorded with {stale[1]}: run again",
                  file=sys.stderr, flush=True)
        return None
    print(f"[evalkit] sweep.resume: {cfg.trainer.name} {cfg.task.name} seed={cfg.seed} already FINISHED as run "
          f"{run_id} (same fingerprint): reused, not run again", file=sys.stderr, flush=True)
    return JobResult(run_id, True, status="FINISHED", reused=True)


def run_job(cfg: DictConfig, run_dir: str, role: str = names.ROLE_JOB) -> JobResult:
    """Run one job end to end. Never raises for a training failure: the run records it. Raises RunDirBusy
    when another job holds `run_dir`, and `Interrupted` after recording the run on SIGINT/SIGTERM. `role`:
    the run's `evalkit.role` (a probe's jobs are `probe_job`)."""
    phases.mark("job_start")
    cfg.hardware.threads = worker_threads(cfg)   # recorded as resolved: params, caliber and the workers agree
    if role == names.ROLE_JOB:                   # every node of a multi-node job: node 0 would not come
        reused = reuse_finished(cfg, role)
        if reused is not None:
            return reused
    if cfg.distributed.nnodes > 1:               # the job's directory is the one every node sees (nodes.py)
        run_dir = os.path.abspath(cfg.distributed.shared_dir)
        if cfg.distributed.node_rank > 0:        # runs its ranks, records nothing: node 0 records them
            return nodes.run_other_node(cfg)
    claim = rundir.claim_fresh(run_dir)
    if claim.archived:
        print(f"[evalkit] {run_dir} held an earlier job's files: moved to {claim.archived}", file=sys.stderr)
        cfg.resume_from = rundir.relocate(cfg.resume_from, run_dir, claim.archived)
    try:
        with StopRequest() as stop, nodes.leading(cfg, run_dir):
            ctl = Controller(cfg, run_dir, stop=stop, role=role,
                             may_defer=role == names.ROLE_JOB and bool(os.environ.get(names.PARENT_RUN_ENV)))
            try:
                return _run(ctl, cfg, stop)
            except InterruptedAgain:        # a second signal: stop at once, the spool keeps what was not shipped
                if ctl.workers:
                    ctl.workers.stop(grace_s=2.0)
                raise Interrupted(stop.signame or "SIGINT", f"interrupted twice; records kept in {ctl.run_dir}/spool:"
                                  f" run evalkit-ship {ctl.run_dir} to finish recording run {ctl.run_id}") from None
    finally:
        claim.release()


def _run(ctl: Controller, cfg: DictConfig, stop: StopRequest) -> JobResult:
    if not ctl.may_defer:
        ctl.start_run()
    elif not ctl.record_when_possible():   # a sweep's job trains on; its run is recorded when the store answers
        ctl.started = time.monotonic()
        print(f"[evalkit] {ctl.unrecorded}; training starts anyway: its records are kept in {ctl.run_dir}/spool "
              f"and the run is recorded when the store answers (else: evalkit-ship {ctl.run_dir})",
              file=sys.stderr, flush=True)
    phases.mark("run_recorded")
    if stop.signame:
        if not ctl.run_recorded:
            raise Interrupted(stop.signame, f"interrupted by {stop.signame} before training started (nothing "
                                            "recorded: the tracking store does not answer)")
        status = ended_status(stop.signame)
        ctl.fail(f"{interruption(stop.signame)} before training started", status=status)
        raise Interrupted(stop.signame, f"{interruption(stop.signame)}: run {ctl.run_id} ended {status} before "
                                        "training started")
    reason = preflight(cfg)
    if reason:
        if not ctl.run_recorded:
            return JobResult(None, False, f"{reason} (not recorded: the tracking store does not answer)", "FAILED")
        return ctl.fail(reason)
    result = ctl.train()
    if stop.signame:     # the signal came while the finished job was being recorded: stop the sweep here
        raise Interrupted(stop.signame, f"interrupted by {stop.signame} after run {result.run_id} ended "
                                        f"{result.status}")
    return result
