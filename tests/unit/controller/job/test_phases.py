"""The controller's wall-clock marks of one job (issue 30): a fresh set per job, written into its run directory."""
from __future__ import annotations

import json

from evalkit.controller.job import phases


def test_marks_are_written_in_order_and_job_start_begins_a_fresh_set(tmp_path):
    phases.mark("job_start")
    phases.mark("workers_start", str(tmp_path))
    first = phases.read(str(tmp_path))
    assert list(first) == ["job_start", "workers_start"] and first["job_start"] <= first["workers_start"]
    phases.mark("workers_start", str(tmp_path))                 # a mark is kept from its first time
    assert phases.read(str(tmp_path)) == first
    phases.mark("job_start")                                     # the next job of a sweep
    phases.mark("run_finished", str(tmp_path))
    assert list(json.loads((tmp_path / phases.FILE).read_text())) == ["job_start", "run_finished"]


def test_an_unwritable_directory_or_a_missing_file_never_fails(tmp_path):
    phases.mark("job_start", str(tmp_path / "gone"))
    assert phases.read(str(tmp_path / "gone")) == {}
    (tmp_path / phases.FILE).write_text("{not json")
    assert phases.read(str(tmp_path)) == {}
