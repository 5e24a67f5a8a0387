"""Jobs run together, taking turns: every job alive at once, one block of optimizer steps at a time.

Each job is an ordinary job (its own run, controller, workers and records, `controller/job/`); what differs is the
order. The jobs start a few at a time, as many as there are usable CPUs (each start-up on a core of its own), each group
once the previous one has finished its warm-up and waits at the turn table (`table.py`), so that no start-up
competes with a job's blocks; then rounds of blocks, in the order and with
the block lengths the `Schedule` gives, until it has what it needs; then every job is told to stop and is recorded
as usual. Between its blocks a job is parked whole: its workers' process groups are stopped (SIGSTOP) from its
`done` to its next `go`, so that what it runs besides the thread that waits at the table (a wrapper's helper thread,
an asynchronous logger, a prefetching process) runs in its own blocks and is charged to it, never to the job timed
meanwhile (a planted helper thread taking 10 % of the core passed before, its cost read as the other
arm's). A job whose workers fail or never reach their warm-up's end ends the rounds: the others stop with the
blocks they have, and the failed one's run says why.
"""
from __future__ import annotations

import os
import signal
import sys
import time
from typing import Protocol

from omegaconf import DictConfig

from evalkit.controller.interrupt import Interrupted, StopRequest
from evalkit.controller.job import phases, rundir
from evalkit.controller.job.result import JobResult
from evalkit.controller.job.run import Controller, preflight
from evalkit.controller.progress import say
from evalkit.controller.turns.table import JobLeft, TurnTable
from evalkit.cpus import usable_cpus, worker_threads
from evalkit.text import one_line

READY_TIMEOUT_S = 300.0     # a job's start-up and warm-up
BLOCK_TIMEOUT_S = 120.0     # one block of steps


class Schedule(Protocol):
    """What the jobs run together are for: the block lengths, the order of each round, when to stop."""

    def block_steps(self, warmup_step_s: dict[str, float]) -> dict[str, int]:
        """Optimizer steps per block of each job, from the median warm-up step each job reported."""

    def order(self, round_index: int) -> list[str]:
        """The jobs in the order they run in round `round_index` (0, 1, ...)."""

    def add(self, round_index: int, seconds: dict[str, float]) -> str | None:
        """One round's block seconds per job; a reason to stop (decided, time limit), or None to go on."""

    def progress(self) -> str:
        """One line on where the measurement stands."""


def run_together(jobs: list[tuple[str, DictConfig, str]], schedule: Schedule, role: str) -> dict[str, JobResult]:
    """Run `jobs` (name, config, run directory) together under `schedule`; every job's result by name. Raises
    `Interrupted` (after recording every run) on SIGINT/SIGTERM."""
    phases.mark("job_start")
    claims = [rundir.claim_fresh(run_dir) for _, _, run_dir in jobs]
    table = TurnTable()
    results: dict[str, JobResult] = {}
    try:
        with StopRequest() as stop:
            started, culprit = _launch(jobs, table, stop, results, role)
            if culprit is None and not stop.signame:
                _rounds(started, table, schedule, stop)
            for name in started:
                table.stop(name)
            _never_started(jobs, started, results, stop, role, culprit)
            return _conclude(started, results)
    finally:
        table.close()
        for claim in claims:
            claim.release()


def _launch(jobs, table: TurnTable, stop: StopRequest, results: dict[str, JobResult],
            role: str) -> tuple[dict, str | None]:
    """Start the jobs a few at a time (as many as there are usable CPUs: each start-up has a core to itself), each
    group once the previous one waits at the table. Returns those started, by name, with their shippers, and the
    job that stopped the launching (it could not start, or died or hung before its warm-up's end), else None. The
    workers of a group that did not reach the table are stopped; those that did are told to stop by the caller."""
    started: dict[str, tuple[Controller, object]] = {}
    at_once = max(1, usable_cpus())
    for first in range(0, len(jobs), at_once):
        group = []
        for name, cfg, run_dir in jobs[first:first + at_once]:      # every run recorded, checked before a launch
            if cfg.distributed.nnodes > 1:
                raise ValueError("jobs that take turns run on one node (distributed.nnodes=1)")
            cfg.hardware.threads = worker_threads(cfg)
            ctl = Controller(cfg, run_dir, stop=stop, role=role)
            ctl.start_run()
            reason = preflight(cfg)
            if reason or stop.signame:
                results[name] = ctl.fail(reason) if reason else ctl.fail(f"interrupted by {stop.signame} before "
                                                                         "training started", status="KILLED")
                return started, name
            group.append((name, ctl))
        for name, ctl in group:
            ctl.extra_spec = table.spec(name)
            started[name] = (ctl, ctl.launch())
        try:
            table.wait_ready({name: (ctl.cfg.distributed.world_size, lambda c=ctl: c.workers.poll() is None)
                              for name, ctl in group}, READY_TIMEOUT_S)
        except (JobLeft, TimeoutError) as exc:
            culprit = getattr(exc, "job", None) or str(exc).split(":", 1)[0]
            print(f"[evalkit] the jobs taking turns stop: {culprit} did not reach its turns ({exc})",
                  file=sys.stderr, flush=True)
            for name, ctl in group:     # a job that closed its connection is ending by itself: its error stays
                if name not in table.ready and not (isinstance(exc, JobLeft) and name == culprit):
                    ctl.workers.stop()
            return started, culprit
    return started, None


def _never_started(jobs, started: dict, results: dict[str, JobResult], stop: StopRequest, role: str,
                   culprit: str | None) -> None:
    """Record the jobs the launching never reached, FAILED, naming the job that stopped it."""
    for name, cfg, run_dir in jobs:
        if name in started or name in results:
            continue
        ctl = Controller(cfg, run_dir, stop=stop, role=role)
        ctl.start_run()
        results[name] = ctl.fail(f"not run: the jobs taking turns stopped before it started, at {culprit}")


class Parking:
    """Stops a job's every process between its blocks and lets it go on for its next one (the module's docstring).
    Each worker leads a process group of its own (its session), which holds what it started unless that left it."""

    def __init__(self, started: dict):
        self._groups = {name: list(ctl.workers.pids) for name, (ctl, _) in started.items()}
        self._parked: set[str] = set()

    def park(self, name: str) -> None:
        self._signal(name, signal.SIGSTOP)
        self._parked.add(name)

    def resume(self, name: str) -> None:
        if name in self._parked:
            self._parked.discard(name)
            self._signal(name, signal.SIGCONT)

    def resume_all(self) -> None:
        for name in list(self._parked):
            self.resume(name)

    def _signal(self, name: str, sig: int) -> None:
        for pid in self._groups[name]:
            try:
                os.killpg(pid, sig)
            except (ProcessLookupError, PermissionError):     # a worker that ended: nothing left to stop
                pass


def _rounds(started: dict, table: TurnTable, schedule: Schedule, stop: StopRequest) -> None:
    """Rounds of blocks until the schedule stops them, a job leaves, or a stop signal comes; every job parked
    between its blocks, and none left parked."""
    parking = Parking(started)
    try:
        for name in started:
            parking.park(name)
        _blocks(started, table, schedule, stop, parking)
    finally:
        parking.resume_all()


def _blocks(started: dict, table: TurnTable, schedule: Schedule, stop: StopRequest, parking: Parking) -> None:
    steps = schedule.block_steps(dict(table.ready))
    last_said = time.monotonic()
    index = 0
    while not stop.signame:
        seconds = {}
        for name in schedule.order(index):
            ctl = started[name][0]
            parking.resume(name)
            try:
                seconds[name] = table.block(name, steps[name], lambda c=ctl: c.workers.poll() is None,
                                            BLOCK_TIMEOUT_S)
                parking.park(name)
            except (JobLeft, TimeoutError) as exc:
                print(f"[evalkit] {name} left its turns in round {index} ({exc}): every job stops",
                      file=sys.stderr, flush=True)
                if isinstance(exc, TimeoutError):
                    ctl.workers.stop()
                return
        reason = schedule.add(index, seconds)
        index += 1
        if reason:
            print(f"[evalkit] turns end after {index} rounds: {reason}", file=sys.stderr, flush=True)
            return
        if time.monotonic() - last_said > 5.0:
            last_said = time.monotonic()
            say(True, f"[evalkit] turns: round {index}: {schedule.progress()}")


def _conclude(started: dict, results: dict[str, JobResult]) -> dict[str, JobResult]:
    """Watch every started job to its end and record it; an interrupt is raised once all are recorded."""
    interrupted: Interrupted | None = None
    for name, (ctl, shipper) in started.items():
        try:
            results[name] = ctl.conclude(shipper)
        except Interrupted as exc:
            interrupted = interrupted or exc
            results[name] = JobResult(ctl.run_id, False, one_line(exc.message), "KILLED")
    if interrupted is not None:
        raise interrupted
    return results
