"""Start the worker ranks as separate processes, each with the environment its wrapper's documented launcher gives it.

The trainer's `launch` names that launcher (`evalkit.launchers`: plain `python` for one process, `torchrun`,
Lightning's own, `mpirun`, `accelerate launch`); wrappers read its variables to join the ranks evalkit started
instead of spawning their own, exactly as under the real launcher. When one rank fails, the
others are stopped: a rank waiting in a collective for a dead peer would otherwise hang. The group
remembers which rank failed first and which ranks it stopped itself, so the run's reason names the cause
(rank 1 killed by SIGKILL), not the symptom it caused in its peers (rank 0's broken gloo connection).
Workers die with their controller (`names.CONTROLLER_PID_ENV`, see `evalkit.worker.run.die_with_controller`).
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field

from evalkit import launchers, names
from evalkit.controller.launch.warm_server import WarmProcess, WarmStartUnavailable, server_for
from evalkit.cpus import default_threads, pinned_cpus


@dataclass
class Outcome:
    """How the ranks ended: exit codes (negative: killed by that signal), the rank that failed first, the
    ranks evalkit stopped itself (after another rank failed, on an interrupt, or past the job's time limit), and the
    interrupt."""

    codes: list[int | None]            # None: a rank on another node that never reported
    first_failed: int | None = None
    stopped: list[int] = field(default_factory=list)
    interrupted: str | None = None     # SIGINT / SIGTERM received by the controller
    node_problem: str | None = None    # several nodes: why a node's ranks are unaccounted for (codes None)
    time_limit_s: float | None = None  # the ranks were stopped past the job's time limit (train.time_limit_s)

    @classmethod
    def from_json(cls, data) -> "Outcome":
        """Read `exit_codes.json` (a plain list of codes in older run directories)."""
        return cls(codes=list(data)) if isinstance(data, list) else cls(**data)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


@dataclass(frozen=True)
class Placement:
    """Where a job's ranks run and how each one starts: the rendezvous, this node's share of the ranks, their
    threads and pinning, the interpreter and the launcher whose variables each rank gets."""

    world_size: int                    # every rank of the job, on every node
    master_addr: str = "127.0.0.1"
    master_port: int | None = None     # None: a free port
    nnodes: int = 1
    node_rank: int = 0
    run_id: str | None = None          # the rendezvous id (the same on every node); None: one of this job's own
    cuda: bool = False
    threads: int | None = None         # None: the node's CPUs shared out
    pin: bool = False                  # each rank on cores of its own (timed jobs)
    pin_at_turn: bool = False          # ... pinned when it first waits its turn (jobs taking turns)
    python: str = sys.executable       # evalkit's interpreter, or a wrapper's environment's (`trainer.env`)
    launcher: str | None = None        # evalkit.launchers; None: plain `python` at one rank, torchrun at several

    @property
    def local(self) -> int:
        return self.world_size // self.nnodes

    @property
    def ranks(self) -> list[int]:
        """This node's global ranks, as torchrun numbers them."""
        return [self.node_rank * self.local + i for i in range(self.local)]


@dataclass(frozen=True)
class WarmStart:
    """Fork the ranks from the adapter's warm server (warm_server.py) instead of starting them fresh."""

    target: str                        # the adapter's class: the server imports its module
    modules: tuple[str, ...] = ()      # the trainer's modules, imported by the server too
    required: bool = False             # hardware.worker_start=warm: no fresh start instead


class WorkerGroup:
    """This node's ranks. `placement.world_size` counts every rank of the job; with several nodes this node starts
    its share, global ranks `node_rank * local .. + local - 1` (`ranks`), as torchrun does; exit codes,
    `first_failed` and `stopped` are positions in `ranks` (the global ranks on node 0)."""

    def __init__(self, job_dir: str, log_dir: str, placement: Placement, warm: WarmStart | None = None):
        p = placement
        self.world_size, self.ranks = p.world_size, p.ranks
        self.log_paths = [os.path.join(log_dir, names.worker_log(r)) for r in self.ranks]
        threads = p.threads or default_threads(p.local)
        self.cpus = pinned_cpus(p.local, threads) if p.pin else None
        self.procs: list[subprocess.Popen | WarmProcess] = []
        self.first_failed: int | None = None
        self.stopped: set[int] = set()
        self.launcher = p.launcher or launchers.chosen(None, p.world_size, p.cuda)
        port, run_id = p.master_port or free_port(p.master_addr), p.run_id or uuid.uuid4().hex[:12]
        for local_rank, rank in enumerate(self.ranks):
            slot = launchers.Slot(rank, local_rank, p.world_size, p.local, p.node_rank, p.nnodes, p.master_addr,
                                  port, run_id, p.cuda,
                                  error_file=os.path.join(log_dir, f"torchelastic_error_rank{rank}.json"))
            env = self._environment(slot, threads, p)
            if warm is not None:
                warm = self._fork(job_dir, env, local_rank, warm, p.python)
                if warm is not None:
                    continue
            with open(self.log_paths[local_rank], "wb") as log:
                env[names.SPAWN_WALL_ENV] = repr(time.time())
                self.procs.append(subprocess.Popen([p.python, "-m", "evalkit.worker", job_dir],
                                                   env=env, stdout=log, stderr=subprocess.STDOUT,
                                                   start_new_session=True))

    def _environment(self, slot: launchers.Slot, threads: int, p: Placement) -> dict[str, str]:
        """A rank's environment: its launcher's variables (no other launcher's or scheduler's), its threads, CPUs
        and GPUs."""
        env = launchers.rank_environment(dict(os.environ), self.launcher, slot)
        env.update({"PYTHONUNBUFFERED": "1", names.CONTROLLER_PID_ENV: str(os.getpid())})
        # Every arm with the same threads, whatever the caller's environment says (no oversubscription).
        env.update({"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)})
        # OpenMP threads that sleep while they wait (unless the caller chose): GNU OpenMP spins by default, and
        # with anything else on the cores (another job of a sweep, another user) the spinning threads take
        # them. A 300-step job beside one busy process took 105 s with two spinning threads, 18 s passive.
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        env.pop(names.CPUS_ENV, None)
        env.pop(names.CPUS_AT_TURN_ENV, None)
        if self.cpus:   # a job taking turns starts on every CPU and pins itself when it first waits its turn
            env[names.CPUS_AT_TURN_ENV if p.pin_at_turn else names.CPUS_ENV] = \
                ",".join(str(c) for c in self.cpus[slot.local_rank])
        if p.cuda:
            # The node's ranks' GPUs only (local rank r on device r): a wrapper that sees more GPUs than ranks
            # may spread one rank over all of them (Ignite's auto_model wraps DataParallel).
            env.setdefault("CUDA_VISIBLE_DEVICES", ",".join(str(r) for r in range(p.local)))
        return env

    def _fork(self, job_dir: str, env: dict[str, str], local_rank: int, warm: WarmStart,
              python: str) -> WarmStart | None:
        """The rank forked from the warm server: `warm` again; None when it cannot be (the rank, and the ones
        after it, start fresh), unless a warm start is required."""
        env[names.SPAWN_WALL_ENV] = repr(time.time())
        try:
            server = server_for(warm.target, env, warm.modules, python)
            self.procs.append(server.fork(job_dir, env, self.log_paths[local_rank]))
            return warm
        except WarmStartUnavailable as exc:
            if warm.required:
                self.stop()
                raise
            print(f"[evalkit] workers start fresh: {exc}", file=sys.stderr)
            return None

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def poll(self) -> list[int] | None:
        """None while any rank runs; else every rank's exit code. A failed rank stops the others."""
        codes = [p.poll() for p in self.procs]
        failed = [r for r, c in enumerate(codes) if c not in (None, 0)]
        if failed and self.first_failed is None:
            # Ranks seen failing in the same poll: one killed by a signal is the cause, an error its symptom.
            self.first_failed = min(failed, key=lambda r: (codes[r] >= 0, r))
        if failed and any(c is None for c in codes):
            self.stop(grace_s=10.0)
            codes = [p.poll() for p in self.procs]
        return None if any(c is None for c in codes) else codes

    def outcome(self, interrupted: str | None = None) -> Outcome:
        return Outcome([p.poll() for p in self.procs], self.first_failed, sorted(self.stopped), interrupted)

    def stop(self, grace_s: float = 5.0) -> None:
        """SIGTERM every live rank, then SIGKILL what is left after `grace_s`."""
        for rank, proc in enumerate(self.procs):
            if proc.poll() is None:
                self.stopped.add(rank)
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for proc in self.procs:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
