"""`evalkit-ship RUN_DIR`: record a job whose tracking store failed, from the spool it left on disk (a sweep ships
its waiting jobs through `reship` too: controller/sweep/callback.py).

Shipping does nothing twice: a run that has ended (FINISHED, FAILED, KILLED) is left exactly as it is, and of a
run still RUNNING the points already in MLflow (through the last step of `train/loss` there) are not sent again.
A run recorded later keeps the times its job had: its start from run.json, its end from job_phases.json (the
workers' end), else the spool's last write.
"""
from __future__ import annotations

import json
import os
import sys

from omegaconf import OmegaConf

from evalkit import names
from evalkit.controller import tracking
from evalkit.controller.job import phases, rundir
from evalkit.controller.job.result import JobResult
from evalkit.controller.job.run import Controller
from evalkit.controller.job.shipper import Shipper
from evalkit.controller.launch.workers import Outcome
from evalkit.controller.tracking import TrackingUnavailable

ALREADY_ENDED = "already ended: left as it is"   # the reason of a result that shipping did not touch


def reship(run_dir: str, uri: str | None = None) -> JobResult:
    for name in (names.JOB_FILE, names.RUN_FILE):
        if not os.path.exists(os.path.join(run_dir, name)):
            raise FileNotFoundError(f"{run_dir} has no {name}: it is not an evalkit run directory (a job's "
                                    "hydra.run.dir, or a sweep's hydra.sweep.dir)")
    with open(os.path.join(run_dir, names.JOB_FILE)) as fh:
        spec = json.load(fh)
    with open(os.path.join(run_dir, names.RUN_FILE)) as fh:
        run = json.load(fh)
    outcome = read_outcome(run_dir)
    cfg = OmegaConf.create(spec["config"])
    uri = uri or run["tracking_uri"]
    # Opening the store checks it first: seconds, where MLflow's own retries on a store that is down take minutes.
    ctl = Controller(cfg, run_dir, uri=uri, run_id=run["run_id"], role=run.get("role", names.ROLE_JOB))
    ended = ended_status(ctl)
    if ended is not None:
        return ended
    if outcome is None and ctl.winding_down:    # killed at its interrupt before it wrote how its workers ended
        outcome = Outcome([None] * cfg.distributed.world_size, interrupted=ctl.winding_down)
    ctl.started_wall = run.get("started_wall") or ctl.started_wall
    ctl.ended_wall = recorded_end(run_dir, spec["spool_dir"])
    if run["run_id"] is None:   # the store never answered while the job ran: its run is recorded now
        record_late_run(ctl, run)
    shipper = Shipper(ctl.client, ctl.run_id, spec["spool_dir"], cfg.distributed.world_size,
                      cfg.tracking.batch_size, shipped_through=last_shipped_step(ctl, run["tracking_uri"]),
                      val_dedup=bool(cfg.trainer.get("val_dedup")))
    claim = rundir.claim(run_dir, what="evalkit-ship")   # never beside the live job that owns the directory
    try:
        return ctl.ship_and_finish(shipper, outcome)
    finally:
        claim.release()


def ended_status(ctl: Controller) -> JobResult | None:
    """The result of a run that has already ended, which shipping leaves untouched; None when it has not (or has
    no run yet, or ended at an interrupt before its controller shipped every record: `ctl.winding_down` then holds
    the interrupt, read from the run's tag)."""
    if ctl.run_id is None:
        return None
    try:
        with tracking.quiet_store_logs():
            run = ctl.client.get_run(ctl.run_id)
    except Exception:  # noqa: BLE001 - the store's answer is read again, with the reason, by last_shipped_step
        return None
    if not recorded_whole(run):
        ctl.winding_down = run.data.tags.get(names.WINDING_DOWN)    # the interrupt, where it ended before shipping
        return None
    return JobResult(ctl.run_id, run.info.status == "FINISHED", ALREADY_ENDED, run.info.status)


def recorded_whole(run) -> bool:
    """Whether an MLflow run has ended with every record shipped (not one ended at an interrupt before its
    controller's wind-down, which evalkit-ship completes)."""
    return run.info.status != "RUNNING" and names.WINDING_DOWN not in run.data.tags


def recorded_end(run_dir: str, spool_dir: str) -> float | None:
    """When the job's workers ended (job_phases.json), else the spool's last write; None when neither is known."""
    marks = phases.read(run_dir)
    if "workers_ended" in marks:
        return marks["workers_ended"]
    walls = [os.path.getmtime(os.path.join(root, f)) for root, _, files in os.walk(spool_dir) for f in files]
    return max(walls, default=None)


def record_late_run(ctl: Controller, run: dict) -> None:
    """Create the run of a sweep's job that trained while the store did not answer, as the job would have
    (nested under its sweep's parent, started when the job started); run.json then names it, so a second
    evalkit-ship does not create another."""
    for env, key in ((names.PARENT_RUN_ENV, "parent_run_id"), (names.SWEEP_ID_ENV, "sweep_id")):
        if run.get(key):
            os.environ[env] = run[key]
    if not ctl.record_when_possible():
        raise TrackingUnavailable(ctl.unrecorded)
    print(f"evalkit-ship: recorded run {ctl.run_id} for {ctl.run_dir} (the store did not answer while it ran)",
          file=sys.stderr)


def last_shipped_step(ctl: Controller, job_uri: str) -> int:
    """The last step of `train/loss` the store already holds (0: none), so no point is sent twice; a store
    that does not hold the job's run is refused."""
    try:
        with tracking.quiet_store_logs():
            ctl.client.get_run(ctl.run_id)
            history = ctl.client.get_metric_history(ctl.run_id, "train/loss")
    except Exception as exc:  # noqa: BLE001 - MLflow raises many types; each means the run cannot be read there
        raise TrackingUnavailable(
            f"the tracking store {tracking.display_uri(ctl.uri)} cannot read run {ctl.run_id} "
            f"({tracking.describe_failure(exc)}): give --tracking-uri the store that holds that run (the job "
            f"recorded into {tracking.display_uri(job_uri)})") from None
    return max((m.step for m in history), default=0)


def read_outcome(run_dir: str) -> Outcome | None:
    """How the workers ended, as the controller recorded it; None when it died before it could (then the
    run's end is read from the spool, never invented)."""
    path = os.path.join(run_dir, names.EXIT_CODES_FILE)
    if not os.path.exists(path):
        return None
    with open(path) as fh:
        return Outcome.from_json(json.load(fh))
