"""`evalkit-ship <sweep dir>`: finish what a sweep could not finish itself. When the store was down at the sweep's
end, or the sweep's process was killed, its parent run stayed RUNNING and some jobs' records stayed in their
spools. This ships every such job (points already in the store are not sent twice), then ends the parent run with
the jobs counted, as the sweep would have: FINISHED or FAILED, KILLED for a sweep whose process died."""
from __future__ import annotations

import json
import os
import sys

from evalkit import names
from evalkit.controller import tracking
from evalkit.controller.job import rundir
from evalkit.controller.job.ship import recorded_whole
from evalkit.controller.sweep.callback import SweepCallback, SweepNotEnded, waiting_jobs
from evalkit.controller.sweep.ledger import entries as ledger_entries
from evalkit.controller.sweep.state import claim_idle, sweep_states

KILLED_REASON = "the sweep's process stopped before it ended (ended by evalkit-ship)"
SKIPPED_DIRS = {names.PREVIOUS_DIR, ".submitit", ".hydra", *rundir.JOB_ENTRIES}   # no job directory inside


def is_sweep_dir(path: str) -> bool:
    return bool(sweep_states(path))


def finish_sweeps(sweep_dir: str, uri: str | None = None) -> bool:
    """Finish every sweep recorded in `sweep_dir` that did not end; True when each has ended."""
    ok = True
    for path in sweep_states(sweep_dir):
        state = claim_idle(path)
        if state is None:
            with open(path) as fh:
                fields = json.load(fh)
            print(f"evalkit-ship: sweep {fields['sweep_id']} is still running (pid {fields.get('pid')}): it ends "
                  "its parent run itself", file=sys.stderr)
            ok = False
            continue
        try:
            ok = _finish(state, sweep_dir, uri) and ok
        finally:
            state.release()
    return ok


def _finish(state, sweep_dir: str, uri: str | None) -> bool:
    fields = state.fields
    ledger = os.path.join(sweep_dir, fields["ledger"])
    left = left_behind(sweep_dir, fields["sweep_id"], ledger)
    if fields.get("ended") and not (left or waiting_jobs(ledger)):
        return True
    sweep = SweepCallback.from_state(state, sweep_dir, uri)
    with tracking.quiet_store_logs():
        status = sweep.client.get_run(sweep.parent_id).info.status
        left = [run_dir for run_dir in left if not _ended(sweep.client, run_dir)]   # recorded whole: left as it is
    unrecorded = bool(left or waiting_jobs(ledger))     # jobs the store does not hold whole yet
    if status != "RUNNING" and not unrecorded:
        print(f"evalkit-ship: sweep {sweep.sweep_id}: its parent run {sweep.parent_id} has already ended ({status})",
              file=sys.stderr)
        state.update(ended=True)
        return True
    still = sweep.ship_the_waiting("plain", left_behind=tuple(left))
    if still:
        print(f"evalkit-ship: sweep {sweep.sweep_id}: {still} job(s) still wait, so its parent run "
              f"{sweep.parent_id} is not ended: run evalkit-ship {sweep_dir} again when they can be recorded",
              file=sys.stderr)
        return False
    # The end the sweep meant (the store failed under it), or KILLED for a sweep whose process died. An abnormal
    # end (KILLED, or the launcher's error) keeps its status; a normal one counts the jobs as they are now.
    end = fields.get("end") or {"status": "KILLED", "reason": KILLED_REASON}
    sweep.count()
    kept = end["status"] == "KILLED" or end.get("reason")
    status = end["status"] if kept else ("FAILED" if sweep.failed else "FINISHED")
    try:
        sweep.end(status, end.get("reason"))
    except SweepNotEnded as exc:
        print(f"evalkit-ship: sweep {sweep.sweep_id}: {exc}", file=sys.stderr)
        return False
    print(f"evalkit-ship: sweep {sweep.sweep_id}: parent run {sweep.parent_id} ended {status} ({sweep.jobs} jobs, "
          f"{sweep.failed} failed)")
    return True


def _ended(client, run_dir: str) -> bool:
    """Whether the job of `run_dir` has a run that has ended (an interrupted job's controller ends it KILLED)."""
    try:
        with open(os.path.join(run_dir, names.RUN_FILE)) as fh:
            run_id = json.load(fh).get("run_id")
        return bool(run_id) and recorded_whole(client.get_run(run_id))
    except Exception:  # noqa: BLE001 - unreadable here: shipping it says why
        return False


def left_behind(sweep_dir: str, sweep_id: str, ledger: str) -> list[str]:
    """The sweep's job directories (their run.json names the sweep) that its ledger never counted: jobs whose
    process died with the sweep, or alone (a launcher's worker killed). Jobs waiting for the store are in the
    ledger already."""
    entries = ledger_entries(ledger)
    known = {e.get("unshipped") for e in entries} | {e.get("shipped") for e in entries}
    counted = {e.get("run_id") for e in entries if e.get("run_id") and not e.get("unshipped")}
    return [run_dir for run_dir, run in _job_dirs(sweep_dir) if run.get("sweep_id") == sweep_id and
            run_dir not in known and (run.get("run_id") is None or run["run_id"] not in counted)]


def _job_dirs(sweep_dir: str):
    """(directory, its run.json) for every job directory under `sweep_dir`, earlier jobs' archives aside."""
    for root, dirs, files in os.walk(sweep_dir):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
        if names.RUN_FILE in files:
            try:
                with open(os.path.join(root, names.RUN_FILE)) as fh:
                    yield root, json.load(fh)
            except (OSError, ValueError):
                continue
