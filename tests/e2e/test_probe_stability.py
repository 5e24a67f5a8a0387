"""The stability probe end to end (issue 13): real `evalkit probe=stability` runs, read back from the store.

The baseline, two planted variants of it (tests/planted/unstable_loop.py) that plant one fault per item, each a
different one, and a third (tests/planted/quiet_loop.py) planting what the judge once let pass (issue 28):
probe_runs.STABILITY_RUNS, the four probe runs side by side. What the judge makes of them (the baseline
passing every item, its resumes bit for bit; RNG, optimizer and scheduler state not restored, a step repeated, the
data position lost, an in-place checkpoint write truncated by the kill and loaded, a damaged checkpoint replaced by a
fresh start, a checkpoint with flipped bytes loaded (shared with plain torch), an out-of-memory error swallowed
with exit 0, a leak of 300 KiB per step, each caught and named; a non-reproducible resume that loses its data
position, errors ended with sys.exit(0), a leak of about 4x the baseline's slope, failed; an unrelated crash on a
damaged checkpoint, not exercised; the verdict's column) is asserted in the unit tier on their recorded evidence
(tests/unit/probes/stability/test_judge_recorded.py); here the store holds what the probe runner logged, the
verdict reads it, and each live result must still equal its recording's (then run
scripts/record_probe_fixtures.py --probe stability).
"""
from __future__ import annotations

import pytest
from helpers import probe_result, store_uri
from probe_runs import STABILITY_RUNS, judged_recording, rerecord, result_shape, run_probe_variants_side_by_side

from evalkit import names


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """name -> (probe run, its stability.json, its store's uri), the four probe runs side by side."""
    dirs = run_probe_variants_side_by_side(tmp_path_factory, "stability")
    return {name: (*probe_result(workdir, "stability")[1:], store_uri(workdir)) for name, workdir in dirs.items()}


def test_the_baseline_passes_every_item(results):
    run, _, _ = results["baseline"]
    assert run.info.status == "FINISHED" and run.data.tags[names.PROBE] == "stability"
    assert run.data.metrics[names.probe_pass("stability")] == 1.0


@pytest.mark.parametrize("name", sorted(STABILITY_RUNS))
def test_each_live_run_is_judged_as_its_recording(results, name):
    _, live, _ = results[name]
    exact = ("items_total", "items_passed", "items_not_exercised", "items_shared_with_torch", "resumes_bit_for_bit",
             "unsafe_loads")
    assert result_shape(live, *exact) == result_shape(judged_recording("stability", name), *exact), \
        f"{name}: {rerecord('stability')}"


def test_the_verdicts_stability_column_shows_the_probes_headline(results):
    from evalkit.analysis import store
    from evalkit.verdict import VerdictOptions, build_verdict

    run, _, uri = results["planted_b"]
    _, _, records = store.read_runs(uri, "evalkit")
    (row,) = build_verdict(records, VerdictOptions()).rows
    stability = row.dimensions["stability"]
    assert row.key.trainer == "unstable" and stability.status == "fail"
    assert stability.figure == run.data.tags[names.probe_headline("stability")]
