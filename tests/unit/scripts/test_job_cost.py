"""scripts/job_cost.py's table (issue 30): a job's parts from its points in time, medians over a sweep's jobs."""
from __future__ import annotations

import json
import sys

from helpers import REPO

sys.path.insert(0, str(REPO / "scripts"))

from job_cost import Sweep, cost_table, job_parts, job_points, splits_table, start_table  # noqa: E402

START = 1000.0


def _points(scale: float = 1.0) -> dict[str, float]:
    """A job whose parts take 1, 2, 3, 4, 10 and 5 s (times `scale`)."""
    offsets = {"job_start": 0, "run_recorded": 0.5, "spawn": 1, "torch_imported": 3, "wrapper_imported": 6,
               "first_forward": 10, "last_step": 20, "workers_ended": 23, "run_finished": 25}
    return {name: START + scale * seconds for name, seconds in offsets.items()}


def _row(table: str, trainer: str) -> dict[str, str]:
    lines = [line.strip("| ").split(" | ") for line in table.splitlines()]
    return next(dict(zip(lines[0], cells)) for cells in lines[2:] if cells[0] == trainer)


def test_the_parts_add_up_to_the_total_and_the_fixed_cost_is_the_total_without_training():
    parts = job_parts(_points())
    assert [parts[name] for name in list(parts)[:6]] == [1, 2, 3, 4, 10, 5]
    assert sum(list(parts.values())[:6]) == parts["total"] == 25
    assert parts["fixed cost"] == 15
    assert (parts["job start to run recorded"], parts["last step to workers ended"]) == (0.5, 3)


def test_each_column_is_the_median_over_the_jobs_and_the_sweep_gives_its_wall_per_job_and_cli_time():
    sweep = Sweep("lightning", launched=START - 4, ended=START + 86, jobs=[_points(1), _points(3), _points(2)])
    row = _row(cost_table([sweep]), "lightning")
    assert row["jobs"] == "3"
    assert row["controller set-up"] == "2.00" and row["training (1st forward to last step)"] == "20.00"
    assert row["total"] == "50.00" and row["fixed cost"] == "30.00"
    assert row["1st job total"] == "25.00"                     # the sweep's first job, alone
    assert row["sweep wall / job"] == "30.00"
    assert row["CLI before 1st job"] == "4.00"                 # to the earliest job's start
    assert _row(splits_table([sweep]), "lightning")["workers ended to run finished"] == "4.00"


def test_a_missing_milestone_shows_a_dash_not_a_crash():
    failed = {k: v for k, v in _points().items() if k not in ("first_forward", "last_step", "run_finished")}
    sweep = Sweep("ignite", START - 1, START + 10, [failed], rc=1)
    row = _row(cost_table([sweep, Sweep("fabric", START, START + 1, [])]), "ignite")
    assert row["wrapper import"] == "3.00"
    assert [row[c] for c in ("task build + wrap to 1st forward", "training (1st forward to last step)",
                             "shipping + run end", "total", "fixed cost")] == ["-"] * 5
    assert set(_row(cost_table([Sweep("fabric", START, START + 1, [])]), "fabric").values()) <= {"fabric", "0", "-"}


def test_a_job_s_points_come_from_its_marks_its_summary_and_its_last_step(tmp_path):
    (tmp_path / "job_phases.json").write_text(json.dumps({"job_start": 100.0, "workers_start": 101.0}))
    (tmp_path / "spool").mkdir()
    (tmp_path / "spool" / "summary_rank0.json").write_text(json.dumps(
        {"startup_torch_imported_s": 2.0, "startup_wrapper_imported_s": 2.5, "startup_first_forward_s": None}))
    (tmp_path / "records").mkdir()
    (tmp_path / "records" / "steps_rank0.csv").write_text("step,wall\n1,110.0\n2,111.5\n")
    points = job_points(tmp_path)
    assert points == {"job_start": 100.0, "workers_start": 101.0, "spawn": 101.0, "torch_imported": 103.0,
                      "wrapper_imported": 103.5, "last_step": 111.5}
    assert job_points(tmp_path / "absent") == {}


def test_the_side_by_side_table_gives_each_way_of_starting_and_the_step_time_ratio():
    fresh = Sweep("ignite (fresh)", START, START + 60, [_points(1), _points(1)], step_times=[0.020, 0.022, 0.024])
    warm = Sweep("ignite (warm)", START, START + 30, [_points(0.5)], step_times=[0.022])
    row = _row(start_table([(fresh, warm)]), "ignite")
    assert (row["fixed cost fresh (s)"], row["fixed cost warm (s)"]) == ("15.00", "7.50")
    assert (row["step fresh (ms)"], row["step warm (ms)"], row["step warm / fresh"]) == ("22.0", "22.0", "1.00")
    no_steps = Sweep("ignite (warm)", START, START + 30, [_points(0.5)])
    assert _row(start_table([(fresh, no_steps)]), "ignite")["step warm / fresh"] == "-"
