"""Ship spooled records to MLflow in batches, and export them as CSV artifacts at the end.

Curves come from rank 0's step records; validation metrics are merged over every rank (sums and
counts), once each rank has reported that validation. A failed `log_batch` (tracking outage) keeps the
points queued for the next call: the spool on disk stays the source of truth. Each kind of failure is said
once, in one line (the shipper retries every flush interval; MLflow's own error logs are silenced).
"""
from __future__ import annotations

import csv
import json
import os
import sys
from collections import defaultdict
from typing import Any

from mlflow.entities import Metric
from mlflow.tracking import MlflowClient

from evalkit import names
from evalkit.controller.tracking import (
    check_reachable,
    describe_failure,
    display_uri,
    is_server,
    log_metrics,
    metric,
    quiet_store_logs,
)
from evalkit.spool import SpoolTail
from evalkit.tasks.finalizers import FINALIZERS

STEP_COLUMNS = ["step", "loss", "lr", "grad_norm", "step_time_s", "loss_scale", "micro_batches", "samples",
                "loss_calls", "sched_steps", "validated_before", "wall", "rng", "lr_groups"]
MICRO_COLUMNS = ["step", "i", "n", "train_mode", "grad", "dtype", "loss", "ids"]


def step_metrics(record: dict[str, Any]) -> list[Metric]:
    step, wall = record["step"], record.get("wall")
    out = []
    values = {names.TRAIN_LOSS: record.get("loss"), names.TRAIN_GRAD_NORM: record.get("grad_norm"),
              names.TRAIN_STEP_TIME: record.get("dt"), names.TRAIN_LOSS_SCALE: record.get("loss_scale")}
    for i, lr in enumerate(record.get("lr", [])):
        values[names.TRAIN_LR if i == 0 else f"train/lr_group{i}"] = lr
    for key, value in values.items():
        if value is not None:     # absent is None; a NaN or inf loss is a divergence, recorded as such
            out.append(metric(key, value, step, wall))
    return out


class Shipper:
    def __init__(self, client: MlflowClient, run_id: str, spool_dir: str, world_size: int,
                 batch_size: int = 1000, shipped_through: int = 0, val_dedup: bool = False):
        """`val_dedup`: validation counts each sample once, as the wrapper's documented evaluation does
        (`trainer.val_dedup`); the samples repeated across ranks are counted either way."""
        self.client, self.run_id, self.batch_size = client, run_id, batch_size
        self.val_dedup = val_dedup
        self.spool_dir = spool_dir
        self.world_size = world_size
        self.tails = [SpoolTail(spool_dir, r) for r in range(world_size)]
        self.steps: list[dict] = []        # rank 0
        self.micro: dict[int, list[dict]] = defaultdict(list)   # rank -> micro-batch records
        self.val: dict[int, dict[int, dict]] = defaultdict(dict)   # step -> rank -> record
        self.params: list[dict] = []
        self.optimizers: list[dict] = []     # rank 0's optimizer records (observe/optimizer_groups.py)
        self.memory: list[dict] = []
        self.values: list[dict] = []       # TrainJob.log_value calls (rank 0)
        self._val_shipped: set[int] = set()
        self._queue: list[Metric] = []
        self.shipped_through = shipped_through     # steps already in MLflow (re-shipping after an outage)
        self.sent = 0
        self.skipped = 0
        self.last_error: str | None = None     # one line: the latest failure, None once a send succeeds
        self.failures: list[str] = []          # every kind of failure seen, in order (each said once)

    def poll(self, final: bool = False) -> int:
        """Read what the workers appended and send it; returns the number of points sent."""
        for rank, tail in enumerate(self.tails):
            for record in tail.read_new():
                self._take(rank, record)
        self._queue_validation(final)
        if self.run_id is None:     # the run is not recorded yet (the server did not answer): kept for later
            return 0
        sent = 0
        try:
            with quiet_store_logs():
                if self.last_error and is_server(self.client.tracking_uri):
                    check_reachable(self.client.tracking_uri)   # seconds; MLflow's own retries take minutes
                while self._queue:     # batch by batch: a failure resends no batch the store already took
                    batch = self._queue[:self.batch_size]
                    log_metrics(self.client, self.run_id, batch, self.batch_size)
                    del self._queue[:len(batch)]
                    sent += len(batch)
        except Exception as exc:  # noqa: BLE001 - keep the points, try again next time
            self.sent += sent
            self._store_failed(exc)
            return sent
        self.last_error = None
        self.sent += sent
        return sent

    def _store_failed(self, exc: Exception) -> None:
        self.last_error = describe_failure(exc)
        if self.last_error not in self.failures:
            self.failures.append(self.last_error)
            print(f"[evalkit] tracking store {display_uri(self.client.tracking_uri)} failed ({self.last_error}): "
                  f"records stay in {self.spool_dir} and sending is retried", file=sys.stderr, flush=True)

    def _take(self, rank: int, record: dict) -> None:
        kind = record.get("kind")
        if kind == "val":
            self.val[record["step"]][rank] = record
        elif kind == "micro":
            self.micro[rank].append(record)
        elif rank != 0:
            return
        elif kind == "step":
            self.steps.append(record)
            if record["step"] > self.shipped_through:
                self._queue.extend(step_metrics(record))
        elif kind == "skip":       # GradScaler skipped an optimizer step (inf/nan gradients)
            self.skipped += 1
            self._queue.append(metric(names.TRAIN_SKIPPED, self.skipped, record["after_step"], record.get("wall")))
        elif kind == "params":
            self.params.append(record)
        elif kind == "optimizer":
            self.optimizers.append(record)
        elif kind == "value":
            self.values.append(record)
            if record.get("value") is not None and record["step"] > self.shipped_through:
                self._queue.append(metric(record["name"], record["value"], record["step"]))
        elif kind == "memory":
            self.memory.append(record)
            if record.get("rss") is not None and record["step"] > self.shipped_through:
                self._queue.append(metric(names.SYS_RSS_MIB, record["rss"] / 2**20, record["step"]))

    def _queue_validation(self, final: bool) -> None:
        for step, by_rank in sorted(self.val.items()):
            if step in self._val_shipped or (len(by_rank) < self.world_size and not final):
                continue
            self._val_shipped.add(step)
            if step <= self.shipped_through and step > 0:
                continue
            merged = merge_validation([by_rank[r] for r in sorted(by_rank)], self.val_dedup)
            if merged.get("value") is not None:
                self._queue.append(metric(names.val_metric(merged['metric']), merged["value"], step))
                self._queue.append(metric(names.VAL_LOSS, merged["loss"], step))

    def validation_rows(self) -> list[dict]:
        return [merge_validation([self.val[s][r] for r in sorted(self.val[s])], self.val_dedup) | {"step": s}
                for s in sorted(self.val)]

    def write_csvs(self, out_dir: str, metric_name: str) -> list[str]:
        os.makedirs(out_dir, exist_ok=True)
        steps = [{**r, "step_time_s": r.get("dt"), "lr": (r.get("lr") or [None])[0],
                  "lr_groups": " ".join(f"{float(v):.17g}" for v in r["lr"]) if len(r.get("lr") or []) > 1 else ""}
                 for r in self.steps]
        val = [{"step": v["step"], "loss": v.get("loss"), metric_name: v.get("value"),
                "samples": v.get("count"), "ranks": v.get("ranks"), "unattributed": v.get("unattributed"),
                "batches": v.get("batches"), "train_mode_batches": v.get("train_mode"),
                "repeated_samples": v.get("repeated"), "deduplicated": v.get("deduplicated")}
               for v in self.validation_rows()]
        paths = [_write_csv(os.path.join(out_dir, names.STEPS_CSV_NAME), steps, STEP_COLUMNS),
                 _write_csv(os.path.join(out_dir, names.VAL_CSV_NAME), val,
                            ["step", "loss", metric_name, "samples", "ranks", "unattributed", "batches",
                             "train_mode_batches", "repeated_samples", "deduplicated"])]
        for rank in sorted(set(range(self.world_size)) | set(self.micro)):   # rank 0's file even when empty
            micro = [{**m, "ids": " ".join(map(str, m.get("ids", [])))} for m in self.micro.get(rank, [])]
            paths.append(_write_csv(os.path.join(out_dir, names.micro_csv_name(rank)), micro, MICRO_COLUMNS))
        if self.params:     # buffers (BatchNorm running statistics): a column of their own, where recorded
            buffers = ["buffers"] if any("buffers" in p for p in self.params) else []
            paths.append(_write_csv(os.path.join(out_dir, names.PARAMS_CSV_NAME),
                                    [{"step": p["step"], **{k: " ".join(f"{v:.9g}" for v in p.get(k, []))
                                                            for k in ("values", *buffers)}}
                                     for p in self.params], ["step", "values", *buffers]))
        if self.optimizers:
            path = os.path.join(out_dir, names.OPTIMIZER_JSON_NAME)
            with open(path, "w") as fh:
                json.dump([{k: v for k, v in r.items() if k != "kind"} for r in self.optimizers], fh, indent=1)
            paths.append(path)
        if self.memory:
            paths.append(_write_csv(os.path.join(out_dir, names.MEMORY_CSV_NAME), self.memory, names.MEMORY_COLUMNS))
        if self.values:
            paths.append(_write_csv(os.path.join(out_dir, names.VALUES_CSV_NAME), self.values, names.VALUES_COLUMNS))
        return paths


def merge_validation(records: list[dict], dedup: bool = False) -> dict:
    """One validation result from every rank's share: sums and counts add, then the task's finalizer. Where the
    ranks recorded each sample's sums (several ranks), `repeated` counts the forwards of a sample already scored (a
    distributed sampler's padding), and `dedup` scores each sample once (its first forward, by rank), as Accelerate's
    gather_for_metrics does. `records`: in rank order."""
    total = sum(r.get("sum", 0.0) for r in records)
    count = sum(r.get("count", 0) for r in records)
    loss_sum = sum(r.get("loss_sum", 0.0) for r in records)
    merged = {"metric": records[0]["metric"], "count": count, "ranks": len(records),
              "unattributed": sum(r.get("unattributed", 0) for r in records),
              "batches": sum(r.get("batches", 0) for r in records),
              "train_mode": sum(r.get("train_mode", 0) for r in records)}
    if all("ids" in r for r in records):
        first: dict[int, tuple[float, int, float]] = {}
        for r in records:
            for sample, *sums in zip(r["ids"], r["id_sum"], r["id_count"], r["id_loss"]):
                first.setdefault(sample, tuple(sums))
        merged["repeated"] = sum(len(r["ids"]) for r in records) - len(first)
        if dedup:
            total, count, loss_sum = (sum(s[k] for s in first.values()) for k in range(3))
            merged["count"], merged["deduplicated"] = count, True
    if count:
        merged["value"] = FINALIZERS[records[0].get("finalize", "identity")](total / count)
        merged["loss"] = loss_sum / count
    return merged


def _write_csv(path: str, rows: list[dict], columns: list[str]) -> str:
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return path
