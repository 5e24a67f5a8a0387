"""Workers forked from a warm server (`evalkit.worker.warm_server`) instead of started as fresh interpreters.

One server per adapter, interpreter (evalkit's, or a wrapper's environment's: `trainer.env`) and worker
environment (paths) in this controller process, started at its first
job and kept for the next ones of a sweep or a probe; each job's workers are forked from it, so a job no longer pays
the imports of torch and its wrapper. `hardware.worker_start`: `auto` forks where it is safe and keeps its meaning
(see `refusal`), `fresh` always starts a new interpreter, `warm` forks or says why it cannot.

`WarmProcess` stands for a forked worker where the launcher holds a `subprocess.Popen`: pid, poll, send_signal,
kill, wait. The server reports each child's end; a child killed or crashed leaves the server and the next job intact.
"""
from __future__ import annotations

import atexit
import json
import os
import signal
import subprocess
import sys
import threading
import time

from omegaconf import DictConfig

from evalkit import launchers, names


class WarmStartUnavailable(RuntimeError):
    """The warm server could not start or refused to fork (hardware.worker_start=warm only: auto falls back)."""


def refusal(cfg: DictConfig, cuda: bool) -> str | None:
    """Why this job's workers must start as fresh interpreters, or None. `fresh` asks for it; a CUDA job (a fork
    after CUDA is unusable, and a wrapper may touch it at import); a timed job (its start-up figures are what a user
    pays, a fresh interpreter's); a job that records deprecations (the wrapper's import-time warnings are among
    them); a job of several nodes (the other nodes start theirs fresh)."""
    mode = cfg.hardware.get("worker_start", "auto")
    if mode == "fresh":
        return "hardware.worker_start=fresh"
    reasons = [why for why, applies in (
        ("a CUDA job", cuda), ("a timed job (observe.profile=timing)", cfg.observe.profile == "timing"),
        ("deprecations recorded (observe.deprecations)", bool(cfg.observe.get("deprecations"))),
        ("several nodes", cfg.distributed.nnodes > 1)) if applies]
    if reasons and mode == "warm":
        raise WarmStartUnavailable(f"hardware.worker_start=warm: {', '.join(reasons)} starts its workers fresh; "
                                   "use hardware.worker_start=auto or fresh")
    return ", ".join(reasons) or None


class WarmServer:
    READY_TIMEOUT_S = 120.0

    def __init__(self, target: str, env: dict[str, str], modules: tuple[str, ...] = (),
                 python: str = sys.executable):
        self.target = target
        self.exited: dict[int, int] = {}
        self.forked: dict[int, int] = {}
        self.ready: dict | None = None
        self.refused: str | None = None
        self._cond = threading.Condition()
        self._next = 0
        # the padding: room for each forked worker to show its own command line and environment (worker/warm_server.py,
        # show_as)
        room = "_" * names.PROC_ROOM
        env = {**{k: v for k, v in env.items() if k not in RANK_VARIABLES}, names.PROC_ROOM_ENV: room}
        self.proc = subprocess.Popen([python, "-m", "evalkit.worker.warm_server", target, room, *modules], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True)
        threading.Thread(target=self._read, name="evalkit-warm-server", daemon=True).start()
        with self._cond:
            self._cond.wait_for(lambda: self.ready or self.refused or self.proc.poll() is not None,
                                self.READY_TIMEOUT_S)
        if not self.ready:
            self.close()
            raise WarmStartUnavailable(self.refused or f"the warm server for {target} ended before it was ready "
                                                       f"(exit {self.proc.poll()})")

    def _read(self) -> None:
        for line in self.proc.stdout:
            message = json.loads(line)
            with self._cond:
                if "exited" in message:
                    self.exited[message["exited"]] = message["code"]
                elif "forked" in message:
                    self.forked[message["forked"]] = message["pid"]
                elif "ready" in message:
                    self.ready = message["ready"]
                elif "refused" in message:
                    self.refused = message["refused"]
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def fork(self, job_dir: str, env: dict[str, str], log: str) -> "WarmProcess":
        with self._cond:
            self._next += 1
            ticket = self._next
            self.proc.stdin.write((json.dumps({"fork": ticket, "job_dir": job_dir, "env": env, "log": log}) + "\n")
                                  .encode())
            self.proc.stdin.flush()
            if not self._cond.wait_for(lambda: ticket in self.forked or not self.alive, 30.0) or not self.alive:
                raise WarmStartUnavailable(f"the warm server for {self.target} stopped answering")
            return WarmProcess(self, self.forked.pop(ticket))

    def close(self) -> None:
        self.release()
        self.reap()

    def release(self) -> None:
        """Close the server's stdin: it kills what is left of its children and ends."""
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass

    def reap(self) -> None:
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class WarmProcess:
    """A worker forked by a WarmServer, with the part of Popen's interface the launcher uses."""

    def __init__(self, server: WarmServer, pid: int):
        self.server, self.pid = server, pid

    def poll(self) -> int | None:
        with self.server._cond:
            return self._code()

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.server._cond:
            while (code := self._code()) is None:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout)
                self.server._cond.wait(0.1 if left is None else min(left, 0.1))
            return code

    def _code(self) -> int | None:
        """The exit code; a server that died (killed) took its children with it."""
        if self.pid in self.server.exited:
            return self.server.exited[self.pid]
        return None if self.server.alive else -signal.SIGKILL

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


_servers: dict[tuple, WarmServer] = {}      # oldest use first
# A server holds torch and its wrapper's imports (RSS 0.2 to 0.4 GB here, shared with its forked workers): up to
# this many at once, the least recently used closed first. A sweep that alternates its trainers (the quick
# evaluation's training sweep cycles through six) would otherwise start a server for every job.
MAX_SERVERS = 8


def server_for(target: str, env: dict[str, str], modules: tuple[str, ...] = (),
               python: str = sys.executable) -> WarmServer:
    """The warm server of this wrapper (the trainer's `modules`, imported by the server with the adapter's module),
    interpreter (a wrapper's environment forks its workers from a server of its own, with its wrapper's version
    imported) and environment, started on first use. A wrapper's servers are one: an adapter of the same wrapper (the
    customization probe's subclasses in adapters/custom/) forks from the server its first adapter started and imports
    its own module in the child; an adapter that names no module (the baseline, a third party's) has a server of
    its own. The environment that identifies a server is what its imports may read (paths, a wrapper's own
    variables): the rank variables, the thread counts (each child sets its own), evalkit's own (`EVALKIT_*`: the
    job's position in its sweep, its parent run) and MLflow's (`MLFLOW_*`: read by the controller, never imported by
    a worker) are set in each forked child."""
    own = tuple(sorted((k, v) for k, v in env.items() if k not in RANK_VARIABLES | THREAD_VARIABLES
                       and not k.startswith(PER_CHILD_PREFIXES)))
    key = (python, modules or target, own)
    server = _servers.pop(key, None)
    if server is None or not server.alive:
        while len(_servers) >= MAX_SERVERS:
            _servers.pop(next(iter(_servers))).close()
        server = WarmServer(target, env, modules, python)
    _servers[key] = server
    return server


def close_all() -> None:
    """Every server ends, all at once (a sweep's end waits for the slowest, not for their sum)."""
    servers = list(_servers.values())
    _servers.clear()
    for server in servers:
        server.release()
    for server in servers:
        server.reap()


atexit.register(close_all)

THREAD_VARIABLES = frozenset({"OMP_NUM_THREADS", "MKL_NUM_THREADS"})
PER_CHILD_PREFIXES = ("EVALKIT_", "MLFLOW_")
# set per worker in the forked child, not part of a server's identity
RANK_VARIABLES = launchers.ALL_VARIABLES | {names.CPUS_ENV, names.SPAWN_WALL_ENV, "CUDA_VISIBLE_DEVICES"}
