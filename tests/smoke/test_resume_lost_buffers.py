"""A resume that restores the weights but not the buffers (issue 44), through the real command: the stability probe's
kill-between drill on the baseline loop with its BatchNorm running statistics reset after loading
(tests/planted/unstable_loop.py, `no_buffers`) fails naming the buffers, from the buffers the resumed job recorded
at its start; the same loop restoring them passes bit for bit, its records holding the buffers of every step."""
from __future__ import annotations

import pytest
from helpers import PLANTED, ok, probe_result, read_records, run_evalkit
from probe_runs import UNSTABLE

from evalkit import names

DRILL = [*UNSTABLE, "probe.only=[kill_between]"]


def _probe(workdir, *extra: str) -> dict:
    ok(run_evalkit(workdir, "probe=stability", *DRILL, *extra, env={"PYTHONPATH": str(PLANTED)}))
    return probe_result(workdir, "stability")


@pytest.mark.parametrize("wrong", ["no_buffers", None])
def test_buffers_lost_on_resume_are_named_and_restored_ones_pass(tmp_path, wrong):
    extra = [f"+trainer.options.resume_wrongs={{kill_between:{wrong}}}"] if wrong else []
    client, run, result = _probe(tmp_path, *extra)
    if wrong:
        (found,) = result["findings"]
        assert found["code"] == "stability.kill_between" and found["first_step"] == 7
        assert found["size"].startswith("diverged at step 7 (resumed after step 6): buffers lost")
        return
    assert result["passed"] and result["figures"]["resumes_bit_for_bit"] == 1, result["headline"]
    (resumed,) = [r for r in client.search_runs([run.info.experiment_id],
                                                 f"tags.`mlflow.parentRunId` = '{run.info.run_id}'")
                  if r.data.tags["mlflow.runName"].endswith("-resume-between")]
    rows = read_records(client, resumed.info.run_id, names.PARAMS_CSV_NAME)
    assert [int(r["step"]) for r in rows] == list(range(6, 25)) and all(r["buffers"] for r in rows)
