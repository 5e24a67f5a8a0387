"""The controller of one job: one MLflow run around one group of worker processes.

It never imports the wrapper under test. It records the run before launching (so a crash leaves a
run), ships the workers' spool while they train (progress on the console), then logs the summaries
and artifacts and ends the run FINISHED or FAILED with the reason.
"""
from __future__ import annotations

import glob
import importlib.util
import json
import os
import signal
import sys
import tempfile
import time
from dataclasses import dataclass

import torch
from mlflow.tracking import MlflowClient
from omegaconf import DictConfig, OmegaConf

from evalkit import tracking
from evalkit.contract import MODES
from evalkit.environment import environment_lock, git_commit, hardware_description
from evalkit.launch import WorkerGroup
from evalkit.secrets import redact
from evalkit.ship import Shipper
from evalkit.spool import read_json
from evalkit.worker import JOB_FILE

RUN_FILE = "run.json"
EXIT_CODES_FILE = "exit_codes.json"
PARENT_RUN_ENV = "EVALKIT_PARENT_RUN_ID"
SWEEP_ID_ENV = "EVALKIT_SWEEP_ID"


@dataclass
class JobResult:
    run_id: str | None
    ok: bool
    reason: str = ""


def caliber(cfg: DictConfig) -> str:
    return (f"hw={cfg.hardware.name}|bs={cfg.train.batch_size}|accum={cfg.train.grad_accum}"
            f"|prec={cfg.precision.name}|ws={cfg.distributed.world_size}|warmup={cfg.observe.warmup_steps}")


def preflight(cfg: DictConfig) -> str | None:
    """A reason the job cannot run at all (checked before launch), or None."""
    trainer = cfg.trainer
    for module in trainer.requires:
        if importlib.util.find_spec(module) is None:
            return (f"trainer '{trainer.name}' needs the '{module}' package, which is not installed: "
                    f"pip install -e '.[{trainer.extra}]'")
    if trainer.mode not in MODES:
        return f"trainer.mode={trainer.mode!r} is not one of {', '.join(MODES)}"
    if cfg.distributed.world_size < 1:
        return f"distributed.world_size={cfg.distributed.world_size} must be at least 1"
    if cfg.train.max_steps < 1 or cfg.train.grad_accum < 1 or cfg.train.batch_size < 1:
        return "train.max_steps, train.grad_accum and train.batch_size must be at least 1"
    if cfg.hardware.device == "cuda" and not torch.cuda.is_available():
        return "hardware=cuda but no CUDA device is visible: use hardware=cpu or hardware=auto"
    if runs_on_cuda(cfg) and torch.cuda.device_count() < cfg.distributed.world_size:
        return (f"distributed.world_size={cfg.distributed.world_size} on hardware={cfg.hardware.name} needs one "
                f"CUDA device per rank, {torch.cuda.device_count()} visible (NCCL refuses two ranks on one "
                "device): lower distributed.world_size or use hardware=cpu")
    return None


def runs_on_cuda(cfg: DictConfig) -> bool:
    """Whether the workers will train on CUDA (`hardware=cuda`, or `auto` with a visible device)."""
    return cfg.hardware.device == "cuda" or (cfg.hardware.device == "auto" and torch.cuda.is_available())


def run_tags(cfg: DictConfig, sweep_id: str | None) -> dict[str, str]:
    return {
        "evalkit.role": "job", "evalkit.trainer": cfg.trainer.name, "evalkit.mode": cfg.trainer.mode,
        "evalkit.task": cfg.task.name, "evalkit.seed": cfg.seed, "evalkit.repeat": cfg.repeat,
        "evalkit.caliber": caliber(cfg), "evalkit.precision": cfg.precision.name,
        "evalkit.requested_precision": cfg.precision.name,
        "evalkit.world_size": cfg.distributed.world_size, "evalkit.hardware": cfg.hardware.name,
        "evalkit.sweep_id": sweep_id, "evalkit.val_metric_margin": cfg.task.metric_margin,
        "mlflow.source.git.commit": git_commit(os.path.dirname(os.path.abspath(__file__))),
    }


class Controller:
    def __init__(self, cfg: DictConfig, run_dir: str, uri: str | None = None, run_id: str | None = None):
        self.cfg, self.run_dir = cfg, os.path.abspath(run_dir)
        self.uri = uri or tracking.resolve_uri(cfg.tracking.uri)
        self.client = MlflowClient(self.uri)
        self.run_id = run_id
        self.workers: WorkerGroup | None = None

    def start_run(self) -> str:
        tracking.check_reachable(self.uri)
        exp = tracking.experiment_id(self.client, self.cfg.tracking.experiment)
        sweep_id = os.environ.get(SWEEP_ID_ENV)
        tags = run_tags(self.cfg, sweep_id)
        if os.environ.get(PARENT_RUN_ENV):
            tags["mlflow.parentRunId"] = os.environ[PARENT_RUN_ENV]
        cfg = self.cfg
        name = cfg.run_name or (f"{cfg.trainer.name}-{cfg.task.name}-{cfg.precision.name}"
                                f"-ws{cfg.distributed.world_size}-s{cfg.seed}")
        adopted = os.environ.pop("MLFLOW_RUN_ID", None) if not os.environ.get(PARENT_RUN_ENV) else None
        if adopted:   # `mlflow run` created the run for this entry point: record into it
            self.run_id = adopted
            tracking.set_tags(self.client, adopted, {"mlflow.runName": name, **tags})
        else:
            run = self.client.create_run(exp, run_name=name,
                                         tags={k: str(v) for k, v in tags.items() if v is not None})
            self.run_id = run.info.run_id
        resolved = OmegaConf.to_container(self.cfg, resolve=True)
        tracking.log_params(self.client, self.run_id, tracking.flatten(resolved))
        self._log_text(OmegaConf.to_yaml(OmegaConf.create(redact(resolved))), "config", "resolved.yaml")
        self._log_text(environment_lock(), "env", "lock.txt")
        self._log_text(json.dumps(hardware_description(), indent=1), "env", "hardware.json")
        return self.run_id

    def _log_text(self, text: str, artifact_dir: str, name: str) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, name)
            with open(path, "w") as fh:
                fh.write(text)
            self.client.log_artifact(self.run_id, path, artifact_dir)

    def fail(self, reason: str) -> JobResult:
        tracking.set_tags(self.client, self.run_id, {"evalkit.failure_reason": reason.splitlines()[0][:500]})
        self.client.set_terminated(self.run_id, "FAILED")
        return JobResult(self.run_id, False, reason)

    def train(self) -> JobResult:
        spool_dir = os.path.join(self.run_dir, "spool")
        os.makedirs(spool_dir, exist_ok=True)
        spec = {"config": OmegaConf.to_container(self.cfg, resolve=True), "spool_dir": spool_dir,
                "ckpt_dir": os.path.join(self.run_dir, "checkpoints"),
                "resume_from": os.path.abspath(self.cfg.resume_from) if self.cfg.resume_from else None}
        with open(os.path.join(self.run_dir, JOB_FILE), "w") as fh:
            json.dump(spec, fh)
        world = self.cfg.distributed.world_size
        tracking.set_tags(self.client, self.run_id, {"evalkit.run_dir": self.run_dir,
                                                     "evalkit.checkpoint_dir": spec["ckpt_dir"]})
        with open(os.path.join(self.run_dir, RUN_FILE), "w") as fh:
            json.dump({"run_id": self.run_id, "tracking_uri": self.uri}, fh)
        shipper = Shipper(self.client, self.run_id, spool_dir, world, self.cfg.tracking.batch_size)
        self.workers = WorkerGroup(self.run_dir, world, self.run_dir, self.cfg.distributed.master_addr,
                                   cuda=runs_on_cuda(self.cfg))
        codes = self._watch(shipper)
        with open(os.path.join(self.run_dir, EXIT_CODES_FILE), "w") as fh:
            json.dump(codes, fh)
        return self.ship_and_finish(shipper, codes)

    def ship_and_finish(self, shipper: Shipper, codes: list[int]) -> JobResult:
        """Final shipping and the run's end; a tracking outage here loses nothing (the spool stays)."""
        try:
            shipper.poll(final=True)
            if shipper.last_error:
                raise RuntimeError(shipper.last_error)
            return self._finish(shipper, os.path.join(self.run_dir, "spool"), codes)
        except Exception as exc:  # noqa: BLE001 - any store failure means the same to the user
            raise tracking.TrackingUnavailable(
                f"the tracking store {self.uri} failed while recording run {self.run_id} "
                f"({type(exc).__name__}: {str(exc)[:200]}); every record is kept in {self.run_dir}/spool: "
                f"when the store answers again, run: evalkit-ship {self.run_dir}") from exc

    def _watch(self, shipper: Shipper) -> list[int]:
        interval, progress_every = self.cfg.tracking.flush_interval_s, self.cfg.tracking.progress_interval_s
        started = last_progress = time.monotonic()
        while (codes := self.workers.poll()) is None:
            time.sleep(interval)
            shipper.poll()
            if time.monotonic() - last_progress >= progress_every:
                last_progress = time.monotonic()
                self._progress(shipper, time.monotonic() - started)
        return codes

    def _progress(self, shipper: Shipper, elapsed: float) -> None:
        last = shipper.steps[-1] if shipper.steps else None
        where = (f"step {last['step']}/{self.cfg.train.max_steps} loss {last['loss']:.4g}"
                 if last and last.get("loss") is not None else "starting")
        warn = f" (tracking: {shipper.last_error}; records kept in the spool)" if shipper.last_error else ""
        print(f"[evalkit] {self.cfg.trainer.name} {self.cfg.task.name} seed={self.cfg.seed}: {where} "
              f"after {elapsed:.0f}s{warn}", file=sys.stderr, flush=True)

    def _finish(self, shipper: Shipper, spool_dir: str, codes: list[int]) -> JobResult:
        client, run_id, world = self.client, self.run_id, self.cfg.distributed.world_size
        summaries = [read_json(spool_dir, f"summary_rank{r}.json") for r in range(world)]
        self._log_summaries(summaries)
        versions = read_json(spool_dir, "versions.json", {})
        tags = {f"evalkit.version.{k}": v for k, v in versions.items()}
        tags["evalkit.wrapper_version"] = next((v for k, v in versions.items() if k != "torch"), versions.get("torch"))
        tags["evalkit.torch_version"] = versions.get("torch")
        tags.update(observed_precision_tags(self.cfg.precision.name, summaries[0]))
        task = read_json(spool_dir, "task.json", {})
        if task:
            tags["evalkit.val_metric"] = task["metric"]
            tags["evalkit.val_metric_higher_is_better"] = str(task["higher_is_better"]).lower()
        tracking.set_tags(client, run_id, tags)
        records_dir = os.path.join(self.run_dir, "records")
        for path in shipper.write_csvs(records_dir, self._metric_name(shipper)):
            client.log_artifact(run_id, path, "records")
        for name in ["effective_config.json", "versions.json"] + [f"summary_rank{r}.json" for r in range(world)]:
            if os.path.exists(os.path.join(spool_dir, name)):
                client.log_artifact(run_id, os.path.join(spool_dir, name), "evalkit")
        for path in sorted(glob.glob(os.path.join(self.run_dir, "worker_rank*.log"))):
            client.log_artifact(run_id, path, "logs")
        errors = [os.path.join(spool_dir, f"error_rank{r}.txt") for r in range(world)]
        errors = [p for p in errors if os.path.exists(p)]
        for path in errors:
            client.log_artifact(run_id, path, "failure")
        if all(c == 0 for c in codes):
            client.set_terminated(run_id, "FINISHED")
            return JobResult(run_id, True)
        return self.fail(failure_reason(codes, errors))

    def _log_summaries(self, summaries: list[dict | None]) -> None:
        points = []
        for rank, summary in enumerate(summaries):
            if summary and summary.get("peak_mem_bytes") is not None:
                points.append(tracking.metric(f"perf/peak_mem_bytes_rank{rank}", summary["peak_mem_bytes"], 0))
        peaks = [s["peak_mem_bytes"] for s in summaries if s and s.get("peak_mem_bytes") is not None]
        if peaks:
            points.append(tracking.metric("perf/peak_mem_bytes", max(peaks), 0))
        # Largest over ranks. peak_rss_growth: what training added over the process's footprint at the window's
        # start (CPU); nvml_used: the device memory NVML saw in use, every allocator included (CUDA).
        for key, name in (("peak_rss_growth_bytes", "perf/peak_rss_growth_bytes"),
                          ("nvml_used_bytes", "perf/nvml_peak_used_bytes")):
            values = [s[key] for s in summaries if s and s.get(key) is not None]
            if values:
                points.append(tracking.metric(name, max(values), 0))
        head = summaries[0] or {}
        for key in ("samples_per_s", "steps_per_s", "step_time_median_s", "window_steps"):
            if head.get(key) is not None:
                value = head[key] * (self.cfg.distributed.world_size if key == "samples_per_s" else 1)
                points.append(tracking.metric(f"perf/{key}", value, 0))
        tracking.log_metrics(self.client, self.run_id, points)
        methods = {"evalkit.throughput_method": head.get("throughput_method"),
                   "evalkit.peak_mem_method": head.get("peak_mem_method")}
        tracking.set_tags(self.client, self.run_id, methods)

    def _metric_name(self, shipper: Shipper) -> str:
        task = read_json(os.path.join(self.run_dir, "spool"), "task.json", {})
        return task.get("metric") or next((v["metric"] for v in shipper.validation_rows()), "metric")


def observed_precision_tags(requested: str, summary: dict | None) -> dict[str, str]:
    """Tag the precision the observers saw next to the one requested; flag a silent substitution."""
    dtypes = (summary or {}).get("observed_dtypes") or {}
    if not dtypes:
        return {}
    observed = max(dtypes, key=dtypes.get)
    expected = {"fp32": "float32", "bf16_mixed": "bfloat16", "fp16_mixed": "float16"}.get(requested)
    tags = {"evalkit.observed_precision": observed, "evalkit.observed_dtypes": json.dumps(dtypes)}
    if expected and observed != expected:
        tags["evalkit.precision_mismatch"] = f"requested {requested} ({expected}), observed {observed}"
    return tags


def failure_reason(codes: list[int], error_files: list[str]) -> str:
    for path in error_files:
        with open(path) as fh:
            first = fh.readline().strip()
        if first:
            return first
    signals = [c for c in codes if c < 0]
    if signals:
        return f"worker killed by {signal.Signals(-signals[0]).name} (exit codes {codes})"
    return f"worker exited with codes {codes}"


def run_job(cfg: DictConfig, run_dir: str) -> JobResult:
    """Run one job end to end. Never raises for a training failure: the run records it."""
    ctl = Controller(cfg, run_dir)
    ctl.start_run()
    reason = preflight(cfg)
    if reason:
        return ctl.fail(reason)
    previous = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}

    def interrupted(signum, frame):
        raise KeyboardInterrupt(signal.Signals(signum).name)

    for s in previous:
        signal.signal(s, interrupted)
    try:
        return ctl.train()
    except KeyboardInterrupt as exc:
        if ctl.workers:
            ctl.workers.stop()
        ctl.fail(f"interrupted ({exc or 'SIGINT'}); records up to the interruption are kept")
        raise
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
