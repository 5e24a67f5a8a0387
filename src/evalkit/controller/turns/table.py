"""The controller's side of taking turns (the protocol is in `evalkit.observe.turns`): a Unix socket that every rank of
the jobs run together connects to; the table lets one job at a time run a block of optimizer steps.

A rank that dies closes its connection: the table sees it at once (`JobLeft`) and never waits for a dead job.
"""
from __future__ import annotations

import os
import shutil
import socket
import tempfile
import time
from typing import Callable

POLL_S = 0.25        # how often a wait looks at the job's workers


class JobLeft(RuntimeError):
    """A job's rank closed its connection or its workers ended before it did what the table waited for."""

    def __init__(self, message: str, job: str | None = None):
        super().__init__(message)
        self.job = job


class Connection:
    def __init__(self, sock: socket.socket):
        self.sock, self._buffer = sock, b""
        sock.settimeout(POLL_S)

    def send(self, line: str) -> None:
        try:
            self.sock.sendall((line + "\n").encode("ascii"))
        except OSError as exc:
            raise JobLeft(f"its connection broke ({exc})") from None

    def read(self, alive: Callable[[], bool], deadline: float, what: str) -> list[str]:
        """The next line's words; JobLeft when the rank closed its end or its workers ended, TimeoutError past
        `deadline` (monotonic)."""
        while b"\n" not in self._buffer:
            try:
                chunk = self.sock.recv(4096)
            except socket.timeout:
                if not alive():
                    raise JobLeft(f"its workers ended while the turn table waited for {what}") from None
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no {what} in time") from None
                continue
            except OSError as exc:
                raise JobLeft(f"its connection broke ({exc})") from None
            if not chunk:
                raise JobLeft(f"it closed its connection before {what}")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode("ascii").split()


class TurnTable:
    def __init__(self) -> None:
        self._dir = tempfile.mkdtemp(prefix="evalkit-turns-")     # short: a socket's path has at most 107 bytes
        self.address = os.path.join(self._dir, "table")
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(self.address)
        self._server.listen(64)
        self._server.settimeout(POLL_S)
        self._ranks: dict[str, list[Connection]] = {}
        self.ready: dict[str, float] = {}      # job -> the largest median warm-up step (s) its ranks reported

    def spec(self, job: str) -> dict:
        """What a job's worker needs to find the table (its job spec's `turns`)."""
        return {"turns": {"address": self.address, "job": job}}

    def wait_ready(self, starting: dict[str, tuple[int, Callable[[], bool]]], timeout_s: float) -> None:
        """Wait until every rank of the jobs starting (name -> its ranks and whether its workers still run)
        connected and said ready; `ready` then has each one's largest median warm-up step (seconds). JobLeft or
        TimeoutError name the job (`.job` / the message) that did not get there."""
        deadline = time.monotonic() + timeout_s
        for job in starting:
            self._ranks.setdefault(job, [])

        def missing() -> list[str]:
            return [j for j, (ranks, _) in starting.items() if len(self._ranks[j]) < ranks]

        while missing():
            try:
                sock, _ = self._server.accept()
            except socket.timeout:
                for job in missing():
                    if not starting[job][1]():
                        raise JobLeft("its workers ended before they reached the end of their warm-up", job) \
                            from None
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{missing()[0]}: its workers did not finish their warm-up within "
                                       f"{timeout_s:.0f} s") from None
                continue
            conn = Connection(sock)
            hello = conn.read(lambda: True, deadline, "a hello")
            if len(hello) != 3 or hello[0] != "hello" or hello[1] not in starting:
                raise JobLeft(f"a worker said {' '.join(hello)!r} where {', '.join(starting)} were starting")
            self._ranks[hello[1]].append(conn)
        for job, (_, alive) in starting.items():
            try:
                self.ready[job] = max(self._expect(conn, "ready", alive, deadline) for conn in self._ranks[job])
            except JobLeft as exc:
                raise JobLeft(str(exc), job) from None
            except TimeoutError as exc:
                raise TimeoutError(f"{job}: {exc}") from None

    def block(self, job: str, steps: int, alive: Callable[[], bool], timeout_s: float) -> float:
        """Let the job's ranks run `steps` optimizer steps; the block's seconds (the slowest rank's)."""
        deadline = time.monotonic() + timeout_s
        for conn in self._ranks[job]:
            conn.send(f"go {steps}")
        return max(self._expect(conn, "done", alive, deadline) for conn in self._ranks[job])

    def _expect(self, conn: Connection, word: str, alive: Callable[[], bool], deadline: float) -> float:
        line = conn.read(alive, deadline, f"'{word}'")
        if len(line) != 2 or line[0] != word:
            raise JobLeft(f"it said {' '.join(line)!r} where the turn table waited for '{word} <seconds>'")
        return float(line[1])

    def stop(self, job: str) -> None:
        """End the job's timed window (its ranks that still listen are told; a closed one is left alone)."""
        for conn in self._ranks.get(job, []):
            try:
                conn.send("stop")
            except JobLeft:
                pass

    def close(self) -> None:
        for conns in self._ranks.values():
            for conn in conns:
                conn.sock.close()
        self._server.close()
        shutil.rmtree(self._dir, ignore_errors=True)
