"""The turn table and its workers' side (controller/turns/table.py, observe/turns.py) over a real Unix socket, the
workers as threads: one job runs at a time, each block has the steps it was given, `stop` ends a worker's training,
and a worker that leaves is seen at once."""
from __future__ import annotations

import itertools
import threading
import time

import pytest
import torch

from evalkit.controller.turns.table import JobLeft, TurnTable
from evalkit.observe.turns import TimedWindowDone, Turns

CPU = torch.device("cpu")


class FakeWorker(threading.Thread):
    """A job's one rank: `warmup` steps, then steps for as long as the table lets it; each step logged."""

    def __init__(self, table: TurnTable, job: str, log: list, warmup: int = 2, leave_after: int | None = None):
        super().__init__(daemon=True)
        self.table, self.job, self.log, self.warmup, self.leave_after = table, job, log, warmup, leave_after
        self.ended: BaseException | None = None
        self.turns: Turns | None = None

    def run(self) -> None:
        self.turns = Turns(self.table.address, self.job, 0, self.warmup, CPU, timeout_s=20)
        step = 0
        try:
            while True:
                step += 1
                self.log.append((self.job, step))
                time.sleep(0.001)
                if self.leave_after is not None and step > self.leave_after:
                    self.turns.close()        # the worker died
                    return
                self.turns.after_step(step, 0.001)
        except TimedWindowDone as exc:
            self.ended = exc
        finally:
            self.turns.close()

    def alive(self) -> bool:
        return self.is_alive()


def test_jobs_take_turns_block_by_block_and_stop_when_told():
    table, log = TurnTable(), []
    workers = {name: FakeWorker(table, name, log) for name in ("a", "b")}
    try:
        for w in workers.values():
            w.start()
        table.wait_ready({name: (1, w.alive) for name, w in workers.items()}, timeout_s=20)
        assert set(table.ready) == {"a", "b"} and all(s > 0 for s in table.ready.values())
        log.clear()                            # the warm-ups ran side by side; from here on, one at a time
        for _ in range(3):
            for name in ("a", "b"):
                seconds = table.block(name, 4, workers[name].alive, timeout_s=20)
                assert seconds >= 0.004
        for name in workers:
            table.stop(name)
        for w in workers.values():
            w.join(10)
    finally:
        table.close()
    # each block ran alone: 4 steps of a, 4 of b, ... (the first step logged of each block is the one its go began)
    runs = [(job, sum(1 for _ in group)) for job, group in itertools.groupby(j for j, _ in log)]
    assert [job for job, _ in runs][:6] == ["a", "b"] * 3 and all(n == 4 for _, n in runs[:6]), runs
    assert all(isinstance(w.ended, TimedWindowDone) for w in workers.values())
    assert [len(w.turns.blocks) for w in workers.values()] == [3, 3]
    assert workers["a"].turns.summary()["turns"]["steps_per_block"] == 4


def test_a_worker_that_leaves_is_seen_at_once():
    table, log = TurnTable(), []
    worker = FakeWorker(table, "a", log, leave_after=5)
    try:
        worker.start()
        table.wait_ready({"a": (1, worker.alive)}, timeout_s=20)
        started = time.monotonic()
        with pytest.raises(JobLeft):
            for _ in range(10):
                table.block("a", 2, worker.alive, timeout_s=20)
        assert time.monotonic() - started < 5
    finally:
        table.close()


def test_a_job_that_never_gets_ready_is_named():
    table = TurnTable()
    try:
        with pytest.raises(JobLeft) as info:
            table.wait_ready({"late": (1, lambda: False)}, timeout_s=5)
        assert info.value.job == "late"
        with pytest.raises(TimeoutError, match="slow"):
            table.wait_ready({"slow": (1, lambda: True)}, timeout_s=0.5)
    finally:
        table.close()
