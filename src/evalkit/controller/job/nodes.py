"""One job over several nodes (`distributed.nnodes` > 1): every node runs `evalkit` with the same settings but its
own `distributed.node_rank`; node 0 records the MLflow run, the others only run their ranks.

The nodes meet in `distributed.shared_dir`, the job's directory on a filesystem every node sees under the same path.
Node 0 owns it as any job owns its run directory (the lock; an earlier job's files, the nodes' included, moved to
`previous/`), writes `job.json` and starts its ranks. Every rank appends to its own spool file there
(`records_rank<r>.jsonl`, r the global rank) and writes its log there, so node 0's shipper and its run's artifacts
cover every node's ranks. A node k > 0 never takes the lock, never moves a file, never opens the tracking store: it
waits until node 0 is running the job, starts its ranks from node 0's `job.json` (the very spec node 0's ranks run,
after its settings are checked against its own), and writes how they ended to `nodes/node<k>.exit.json`; node 0
waits for that report before it ends the run, so the run's outcome covers every rank.

Liveness without trusting clocks or leftovers: each node's controller rewrites `.evalkit-node<k>.json` (a beacon: a
nonce, a counter and its state) every second, and a node believes another's beacon only once it has seen it change;
an earlier job's beacon never changes. A node whose ranks fail (or that is interrupted) asks the others to stop theirs
(`nodes/stop`): a rank waiting in a collective for a peer that died would otherwise wait for the process group's
timeout.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import threading
import time
import uuid
from typing import Any, Iterator

from omegaconf import DictConfig, OmegaConf

from evalkit import launchers, names, trainers
from evalkit.controller.interrupt import Interrupted, StopRequest
from evalkit.controller.job.environment import runs_on_cuda
from evalkit.controller.job.result import JobResult
from evalkit.controller.launch import warm_server
from evalkit.controller.launch.workers import Outcome, Placement, WarmStart, WorkerGroup
from evalkit.controller.progress import say
from evalkit.envs.select import worker_python

BEAT_S = 1.0                 # how often a node's controller rewrites its beacon
POLL_S = 0.1
# Settings each node may have its own of: where it records, which node it is, the threads node 0 resolved for all.
NODE_KEYS = ("tracking", "sweep", "run_name", "resume_from", "distributed.node_rank", "hardware.threads")


def beacon_path(shared_dir: str, node: int) -> str:
    """Beside the directory's lock, outside `names.NODES_DIR`: node 0 never moves a beacon aside (a node that
    arrived first is no earlier job's leftover; a leftover beacon does no harm: it never changes)."""
    return os.path.join(shared_dir, f".evalkit-node{node}.json")


def report_path(shared_dir: str, node: int) -> str:
    return os.path.join(shared_dir, names.NODES_DIR, f"node{node}.exit.json")


def stop_path(shared_dir: str) -> str:
    return os.path.join(shared_dir, names.NODES_DIR, "stop")


def _tmp_beside(path: str) -> str:
    """A temporary name beside `path` that no other process, on this host or another, picks."""
    return f"{path}.tmp-{socket.gethostname()}-{os.getpid()}-{threading.get_ident()}"


def _write_json(path: str, payload: Any) -> None:
    """Replace `path` whole (rename is atomic, also on NFS): a reader on any node sees the old file or the new."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = _tmp_beside(path)
    with open(tmp, "w") as fh:
        json.dump(payload, fh)
    os.replace(tmp, path)


def _create_json(path: str, payload: Any) -> bool:
    """Create `path` whole unless it exists; True when this call created it. The file is written aside and
    hard-linked into place: link(2) fails on an existing name, atomically, also on NFS (O_EXCL is not reliable
    there), so of nodes asking at once exactly one wins, and no reader sees a half-written file."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = _tmp_beside(path)
    with open(tmp, "w") as fh:
        json.dump(payload, fh)
    try:
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    finally:
        os.unlink(tmp)


def _read_json(path: str) -> Any:
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def ask_to_stop(shared_dir: str, why: str) -> bool:
    """Ask every node to stop its ranks; the first request stays (it names the cause): True when it is this one."""
    with contextlib.suppress(OSError):
        return _create_json(stop_path(shared_dir), {"by_pid": os.getpid(), "host": socket.gethostname(),
                                                     "why": why})
    return False


class Beacon:
    """This node's controller is alive: its beacon rewritten every BEAT_S by a thread, with its state."""

    def __init__(self, shared_dir: str, node: int, **info: Any):
        self.path = beacon_path(shared_dir, node)
        self.info = {"node_rank": node, "pid": os.getpid(), "host": socket.gethostname(), "nonce": uuid.uuid4().hex,
                     **info}
        self.beat = 0
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="evalkit-node-beacon", daemon=True)

    def start(self) -> "Beacon":
        """The first beat, written or raising OSError (a folder this node cannot write to), then the thread."""
        self.beat += 1
        _write_json(self.path, {**self.info, "beat": self.beat})
        self._thread.start()
        return self

    def update(self, **info: Any) -> None:
        with self._lock:
            self.info.update(info)
        self._write()

    def close(self, **info: Any) -> None:
        """The last beat (a final state, e.g. ended); the beacon stops changing."""
        self._done.set()
        if self._thread.is_alive():
            self._thread.join()
        self.update(**info)

    def _run(self) -> None:
        while not self._done.wait(BEAT_S):
            self._write()

    def _write(self) -> None:
        with self._lock:
            self.beat += 1
            payload = {**self.info, "beat": self.beat}
            with contextlib.suppress(OSError):    # the directory moved aside or the filesystem hiccups: next beat
                _write_json(self.path, payload)


class Watch:
    """Another node's beacon, believed once seen changing (an earlier job's leftover never changes)."""

    def __init__(self, path: str):
        self.path = path
        self.last = _read_json(path)
        self.changed_at: float | None = None      # monotonic time of the last change seen

    def look(self) -> dict | None:
        """The beacon's content when it has changed since this watch began, else None."""
        now = _read_json(self.path)
        if now is not None and now != self.last:
            self.last, self.changed_at = now, time.monotonic()
        return self.last if self.changed_at is not None else None

    def silent_for(self) -> float:
        return time.monotonic() - self.changed_at if self.changed_at is not None else float("inf")


# ------------------------------------------------------------------ node 0
_leading: dict[str, Beacon] = {}     # shared dir -> node 0's beacon while its job runs


@contextlib.contextmanager
def leading(cfg: DictConfig, run_dir: str) -> Iterator[None]:
    """Node 0 of a multi-node job (nothing otherwise): its beacon in the shared directory while the job runs,
    `starting` until its ranks start (`running`), `ended` when the job ends, so that the other nodes start their
    ranks from this job's `job.json`, and end at once when node 0 ended without starting any."""
    if cfg.distributed.nnodes <= 1:
        yield
        return
    run_dir = os.path.abspath(run_dir)
    beacon = _leading[run_dir] = Beacon(run_dir, 0, state="starting").start()
    try:
        yield
    finally:
        _leading.pop(run_dir, None)
        beacon.close(state="ended")


def _placement(job_cfg: DictConfig, dist: DictConfig, node_rank: int, cuda: bool, threads: int,
               pin_at_turn: bool = False) -> Placement:
    """Where this node's ranks of the job run: `dist` this node's distributed settings, `job_cfg` the job's (node
    0's, on the other nodes: its trainer, threads and observe profile)."""
    return Placement(dist.world_size, dist.master_addr, dist.master_port, dist.nnodes, node_rank,
                     run_id=rendezvous_id(dist) if dist.nnodes > 1 else None, cuda=cuda, threads=threads,
                     pin=job_cfg.observe.profile == "timing", pin_at_turn=pin_at_turn,
                     python=worker_python(job_cfg.trainer),
                     launcher=launchers.chosen(job_cfg.trainer.get("launch"), dist.world_size, cuda))


def start_ranks(cfg: DictConfig, run_dir: str, run_id: str | None, cuda: bool, threads: int,
                pin_at_turn: bool = False) -> Any:
    """This job's ranks on this node: a WorkerGroup; on node 0 of several, a NodeGroup (its ranks and the reports
    of the other nodes' ranks)."""
    dist = cfg.distributed
    placement = _placement(cfg, dist, dist.node_rank, cuda, threads, pin_at_turn)
    warm_start = None if warm_server.refusal(cfg, cuda) else WarmStart(
        cfg.trainer._target_, tuple(trainers.modules(cfg.trainer)), cfg.hardware.get("worker_start") == "warm")
    group = WorkerGroup(run_dir, run_dir, placement, warm_start)
    if dist.nnodes <= 1:
        return group
    beacon = _leading.get(os.path.abspath(run_dir)) or Beacon(run_dir, 0).start()
    beacon.update(state="running", run_id=run_id)
    return NodeGroup(group, run_dir, dist.nnodes, dist.world_size, dist.node_timeout_s)


def rendezvous_id(dist: DictConfig) -> str:
    """TORCHELASTIC_RUN_ID, the same on every node of the job."""
    return f"evalkit-{dist.master_addr}-{dist.master_port}"


class NodeGroup:
    """Node 0's view of every rank: its own (a WorkerGroup) and the other nodes', from their reports. The same
    interface as WorkerGroup (poll, outcome, stop), over global ranks."""

    def __init__(self, local: WorkerGroup, shared_dir: str, nnodes: int, world_size: int, timeout_s: float):
        self.local, self.shared_dir, self.world_size, self.timeout_s = local, shared_dir, world_size, timeout_s
        self.watches = {k: Watch(beacon_path(shared_dir, k)) for k in range(1, nnodes)}
        self.reports: dict[int, dict] = {}
        self.started = time.monotonic()
        self.local_ended: float | None = None
        self.problem: str | None = None
        self.asked = False

    def poll(self) -> list[int] | None:
        codes = self.local.poll()
        if codes is not None and self.local_ended is None:
            self.local_ended = time.monotonic()
        for k, watch in self.watches.items():
            watch.look()
            if k not in self.reports:
                report = _read_json(report_path(self.shared_dir, k))
                if report is not None:
                    self.reports[k] = report
        remote_failed = [k for k, r in self.reports.items() if any(c != 0 for c in r["codes"])]
        if (remote_failed or self.local.first_failed is not None) and not self.asked:
            self._ask(f"ranks of node {remote_failed[0] if remote_failed else 0} failed")
        if remote_failed and codes is None:
            self.local.stop(grace_s=10.0)
            codes = self.local.poll()
        missing = [k for k in self.watches if k not in self.reports]
        if missing and self.problem is None:
            self.problem = self._missing_problem(missing)
            if self.problem:
                self._ask(self.problem)
                if codes is None:
                    self.local.stop(grace_s=10.0)
                    codes = self.local.poll()
        if codes is None:
            return None
        if missing and self.problem is None:
            time.sleep(POLL_S)     # this node's ranks ended; the others' reports are on their way
            return None
        return self.outcome().codes

    def _missing_problem(self, missing: list[int]) -> str | None:
        """Why a node's report will not come: it never joined (within the timeout, or a few beats after this
        node's ranks ended), or its controller stopped answering."""
        ended = self.local_ended is not None and time.monotonic() - self.local_ended > 3 * BEAT_S
        for k in missing:
            watch = self.watches[k]
            if watch.changed_at is None and (ended or time.monotonic() - self.started > self.timeout_s):
                return (f"node {k} did not join the job (no live beacon in {os.path.dirname(watch.path)} "
                        f"{'before node 0’s ranks ended' if ended else f'within {self.timeout_s:.0f} s'}): "
                        f"start evalkit there with distributed.node_rank={k} and the same settings, with "
                        f"distributed.shared_dir={self.shared_dir} on a filesystem both nodes see")
            if watch.changed_at is not None and watch.silent_for() > self.timeout_s:
                return (f"node {k}'s controller stopped answering (its beacon unchanged for "
                        f"{self.timeout_s:.0f} s) before it reported how its ranks ended: see its console")
        return None

    def _ask(self, why: str) -> None:
        self.asked = True
        ask_to_stop(self.shared_dir, why)

    def stop(self, grace_s: float = 5.0) -> None:
        """This node's ranks, and a request to the other nodes to stop theirs (an interrupt)."""
        if not self.asked:
            self._ask("node 0 was interrupted")
        self.local.stop(grace_s)

    @property
    def pids(self) -> list[int]:
        return self.local.pids

    def outcome(self, interrupted: str | None = None) -> Outcome:
        """Every rank's end in global rank order (None: a rank whose node did not report), the rank that failed
        first over all nodes, the ranks evalkit stopped on every node."""
        local = self.local.outcome(interrupted)
        codes: list[int | None] = [None] * self.world_size
        stopped = [self.local.ranks[i] for i in local.stopped]
        firsts = [self.local.ranks[local.first_failed]] if local.first_failed is not None else []
        for i, rank in enumerate(self.local.ranks):
            codes[rank] = local.codes[i]
        for k, report in self.reports.items():
            for rank, code in zip(report["ranks"], report["codes"]):
                codes[rank] = code
            stopped += report.get("stopped", [])
            if report.get("first_failed") is not None:
                firsts.append(report["first_failed"])
            if report.get("interrupted"):
                interrupted = interrupted or f"{report['interrupted']} on node {k}"
        problem = self.problem or next((r["problem"] for r in self.reports.values() if r.get("problem")), None)
        return Outcome(codes, first_cause(firsts, codes, stopped, self.shared_dir), sorted(set(stopped)),
                       interrupted, node_problem=problem)


def first_cause(candidates: list[int], codes: list[int | None], stopped: list[int], shared_dir: str) -> int | None:
    """The rank that failed first over the nodes: each node's first failure that evalkit did not cause by stopping
    it; a rank killed by a signal before one that raised (its peers' errors are the symptoms), then the earliest
    error file (written on the shared filesystem: one clock), then the lowest rank."""
    causes = [r for r in candidates if r not in stopped and codes[r] not in (None, 0)] or \
        [r for r in candidates if codes[r] not in (None, 0)]
    if not causes:
        return None

    def written(rank: int) -> float:
        try:
            return os.path.getmtime(os.path.join(shared_dir, names.SPOOL_DIR, names.error_file(rank)))
        except OSError:
            return float("inf")

    return min(causes, key=lambda r: (codes[r] >= 0, written(r), r))


# ------------------------------------------------------------------ node k > 0
class NodeFailed(RuntimeError):
    """This node could not run its share of the job (the message says why and what to do)."""


def identity(config: dict) -> dict[str, Any]:
    """A job's settings as flat keys, without those each node may have its own of (NODE_KEYS)."""
    flat: dict[str, Any] = {}

    def walk(node: Any, prefix: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                walk(value, f"{prefix}{key}.")
        elif not any(prefix[:-1] == k or prefix.startswith(f"{k}.") for k in NODE_KEYS):
            flat[prefix[:-1]] = node

    walk(config, "")
    return flat


def settings_differ(mine: dict, theirs: dict) -> list[str]:
    """`key=<here> (node 0: <there>)` for each setting that differs."""
    a, b = identity(mine), identity(theirs)
    return [f"{k}={a.get(k)} (node 0: {b.get(k)})" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


def run_other_node(cfg: DictConfig) -> JobResult:
    """Node k > 0: wait for node 0 to run the job in the shared directory, run this node's ranks, report how they
    ended there (node 0 records them) and here (stderr and the exit code through the JobResult). Records nothing
    in MLflow."""
    dist, mode = cfg.distributed, cfg.tracking.progress
    node, shared = dist.node_rank, os.path.abspath(dist.shared_dir)
    local = dist.world_size // dist.nnodes
    ranks = list(range(node * local, (node + 1) * local))
    who = f"node {node} (rank{'s' * (local > 1)} {ranks[0]}{f'..{ranks[-1]}' if local > 1 else ''})"
    with StopRequest() as stop:
        try:
            beacon = Beacon(shared, node, state="waiting", ranks=ranks).start()
        except OSError as exc:
            return JobResult(None, False, f"{who}: cannot write to distributed.shared_dir={shared} ({exc}): it must "
                                          "be a writable folder every node sees", "FAILED")
        try:
            say(mode, f"[evalkit] {who}: waiting for node 0 to start the job in {shared}")
            try:
                spec, lead = _wait_for_node0(cfg, shared, stop)
                if stop.signame:
                    raise NodeFailed(f"interrupted by {stop.signame} before its ranks started")
            except NodeFailed as exc:      # said to node 0 too: its ranks would wait for this node's
                with contextlib.suppress(OSError):
                    _write_json(report_path(shared, node), {"node_rank": node, "ranks": ranks, "codes": [None] * local,
                                                            "problem": f"{who}: {exc}"})
                if stop.signame:
                    raise Interrupted(stop.signame, f"{who}: {exc}") from None
                return JobResult(None, False, f"{who}: {exc}", "FAILED")
            job_cfg = OmegaConf.create(spec["config"])
            run = f"run {lead['run_id']}" if lead.get("run_id") else "the run"
            say(mode, f"[evalkit] {who}: node 0 records {run}; starting this node's ranks")
            group = WorkerGroup(shared, shared, _placement(job_cfg, dist, node, runs_on_cuda(cfg),
                                                           job_cfg.hardware.threads))
            beacon.update(state="running")
            outcome, problem, asked = _watch_ranks(group, shared, dist.node_timeout_s, stop)
            report = {"node_rank": node, "ranks": ranks, "codes": outcome.codes, "interrupted": outcome.interrupted,
                      "first_failed": ranks[outcome.first_failed] if outcome.first_failed is not None else None,
                      "stopped": [ranks[i] for i in outcome.stopped], "problem": problem}
            try:
                _write_json(report_path(shared, node), report)
            except OSError as exc:
                problem = problem or f"its report could not be written to {shared} ({exc}): node 0 cannot know"
            failed = any(c != 0 for c in outcome.codes)
            if failed and not outcome.interrupted:
                ask_to_stop(shared, f"ranks of node {node} failed")
        finally:
            beacon.close(state="ended")
    if outcome.interrupted:
        raise Interrupted(outcome.interrupted, f"{who}: interrupted by {outcome.interrupted}: its ranks were stopped "
                                               f"(exit codes {outcome.codes}); node 0 records {run}")
    if not failed and not problem:
        say(mode, f"[evalkit] {who}: its ranks FINISHED; node 0 records {run}")
        return JobResult(None, True, status="FINISHED")
    reason = node_reason(outcome, ranks, shared, problem or (f"its ranks were stopped on request ({asked})"
                                                             if asked else None))
    return JobResult(None, False, f"{who}: {reason}; node 0 records {run}", "FAILED")


def _wait_for_node0(cfg: DictConfig, shared: str, stop: Any) -> tuple[dict, dict]:
    """node 0's job spec and beacon, once its beacon is live and running; NodeFailed when it does not come within
    the timeout, ended without starting its ranks, or runs other settings."""
    watch, timeout = Watch(beacon_path(shared, 0)), cfg.distributed.node_timeout_s
    started = time.monotonic()
    while not stop.signame:
        lead = watch.look()
        if lead is not None and lead.get("state") == "running":
            spec = _read_json(os.path.join(shared, names.JOB_FILE))
            if spec is None:
                raise NodeFailed(f"node 0 runs in {shared} but its {names.JOB_FILE} cannot be read there: "
                                 "distributed.shared_dir must be one folder every node sees")
            differ = settings_differ(OmegaConf.to_container(cfg, resolve=True), spec["config"])
            if differ:
                raise NodeFailed(f"node 0 runs the job in {shared} with other settings: {'; '.join(differ[:5])}: run "
                                 "every node with the same settings but distributed.node_rank")
            return spec, lead
        if lead is not None and lead.get("state") == "ended":
            raise NodeFailed(f"node 0 ended its job in {shared} before starting its ranks: its console says why")
        if time.monotonic() - started > timeout and (lead is None or watch.silent_for() > timeout):
            raise NodeFailed(f"node 0 did not start the job in {shared} within {timeout:.0f} s (no live "
                             f"{os.path.basename(beacon_path(shared, 0))} there): start evalkit with "
                             "distributed.node_rank=0 and the same settings; distributed.shared_dir must be one "
                             "folder every node sees (a shared filesystem); a longer wait: distributed.node_timeout_s")
        time.sleep(POLL_S)
    return {}, {}


def _watch_ranks(group: WorkerGroup, shared: str, timeout: float, stop: Any) -> tuple[Outcome, str | None,
                                                                                  str | None]:
    """Wait for this node's ranks; stop them on an interrupt, when another node asks, or when node 0 stopped
    answering (its controller died: nobody would record them). Returns how they ended, a problem of the job for
    node 0 to record, and why another node asked this one to stop (said on this node's console only)."""
    watch, problem, asked, stopping = Watch(beacon_path(shared, 0)), None, None, False
    watch.changed_at = time.monotonic()
    while group.poll() is None:
        lead = watch.look()
        if not stopping and stop.signame:
            stopping = True
        elif not stopping and os.path.exists(stop_path(shared)) and group.first_failed is None:
            stopping, asked = True, (_read_json(stop_path(shared)) or {}).get("why", "another node asked")
        elif not stopping and (watch.silent_for() > timeout or (lead or {}).get("state") == "ended"):
            stopping, problem = True, ("node 0 stopped answering while this node's ranks ran (its beacon "
                                       f"{'says ended' if (lead or {}).get('state') == 'ended' else 'is unchanged'})")
        if stopping:
            group.stop(grace_s=10.0)
            continue
        time.sleep(POLL_S)
    outcome = group.outcome(stop.signame)
    if outcome.first_failed is not None and outcome.first_failed in outcome.stopped:
        outcome.first_failed = None        # stopped on request: a symptom, not a cause
    return outcome, problem, asked


def node_reason(outcome: Outcome, ranks: list[int], shared: str, problem: str | None) -> str:
    """One line: this node's first failure (its error's first line, or the signal), or the problem seen."""
    codes = outcome.codes
    order = ([outcome.first_failed] if outcome.first_failed is not None else []) + \
        [i for i in range(len(ranks)) if i not in outcome.stopped] + list(outcome.stopped)
    for i in order:
        if codes[i] in (0, None):
            continue
        try:
            with open(os.path.join(shared, names.SPOOL_DIR, names.error_file(ranks[i]))) as fh:
                cause = fh.readline().strip()
        except OSError:
            cause = ""
        if not cause and codes[i] < 0:
            cause = f"killed by {signal.Signals(-codes[i]).name}"
        if cause:
            text = f"rank {ranks[i]}: {cause} (exit codes {codes})"
            return f"{problem}; {text}" if problem else text
    return problem or f"its ranks exited with codes {codes}"
