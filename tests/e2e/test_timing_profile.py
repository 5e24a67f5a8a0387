"""The `timing` observation profile: fewer hooks, only what throughput and memory need, the same summary keys
(the baseline adapter driven in-process on a tiny task), and one timed job end to end."""
from __future__ import annotations

import json

from helpers import read_records, run_ok

BATCH, ACCUM, STEPS, WARMUP = 8, 2, 6, 2


def test_timing_profile_job_finishes_and_ships_its_throughput(workdir):
    client, run = run_ok(workdir, "observe.profile=timing", "train.max_steps=12", "task.hidden=64")
    assert run.info.status == "FINISHED"
    metrics = run.data.metrics
    assert {"perf/samples_per_s", "perf/steps_per_s", "perf/step_time_median_s", "perf/peak_mem_bytes"} <= set(metrics)
    assert metrics["perf/window_steps"] == 12 - 5           # after observe.warmup_steps
    assert len(client.get_metric_history(run.info.run_id, "train/step_time_s")) == 12
    with open(client.download_artifacts(run.info.run_id, "evalkit/summary_rank0.json")) as fh:
        assert json.load(fh)["observe_profile"] == "timing"
    rows = read_records(client, run.info.run_id)
    assert [int(r["step"]) for r in rows] == list(range(1, 13))
    assert {int(r["samples"]) for r in rows} == {32}                # train.batch_size
    assert all(r["loss"] and r["lr"] and not r["grad_norm"] for r in rows)
