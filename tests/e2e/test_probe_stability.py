"""The stability probe end to end (issue 13): real `evalkit probe=stability` runs, read back from the store.

The baseline passes every item (its resumes bit for bit, the damaged checkpoints refused, the errors shown, no leak
in a 300-step run). Two planted variants of it (tests/planted/unstable_loop.py) plant one fault per item, each a
different one, and each is caught and named: RNG, optimizer and scheduler state not restored, a step repeated,
the data position lost, an in-place checkpoint write truncated by the kill and loaded, a damaged checkpoint
replaced by a fresh start, an out-of-memory error swallowed with exit 0, and a leak of 300 KiB per step.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from helpers import PLANTED, ok, probe_result, run_evalkit, store_uri

from evalkit import names

UNSTABLE = ["trainer._target_=unstable_loop.UnstableAdapter", "trainer.name=unstable", "probe.world_sizes=[1]"]
RUNS = {
    "baseline": ["trainer=baseline", "probe.long_steps=300"],
    "planted_a": UNSTABLE + [
        "+trainer.options.resume_wrongs={kill_between:no_rng,kill_after_ckpt:no_optimizer,kill_in_save:data_restart}",
        "+trainer.options.fresh_on_corrupt=true", "+trainer.options.swallow_oom=true", "+trainer.options.leak_kb=300",
        "probe.only=[kill_between,kill_after_checkpoint,kill_during_write,corrupt_truncated,out_of_memory,long_run]",
        "probe.long_steps=300"],
    "planted_b": UNSTABLE + [
        "+trainer.options.resume_wrongs={kill_between:no_scheduler,kill_after_ckpt:repeat_step}",
        "+trainer.options.in_place=true", "probe.only=[kill_between,kill_after_checkpoint,kill_during_write]"],
}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """name -> (probe run, its stability.json, its store's uri), the three probe runs side by side."""
    dirs = {name: tmp_path_factory.mktemp(name) for name in RUNS}
    env = {"PYTHONPATH": str(PLANTED)}
    with ThreadPoolExecutor(len(RUNS)) as pool:
        procs = {name: pool.submit(run_evalkit, dirs[name], "probe=stability", *overrides, env=env)
                 for name, overrides in RUNS.items()}
        procs = {name: p.result() for name, p in procs.items()}
    out = {}
    for name, proc in procs.items():
        ok(proc)
        out[name] = (*probe_result(dirs[name], "stability")[1:], store_uri(dirs[name]))
    return out


def finding(result: dict, item: str) -> dict:
    return next(f for f in result["findings"] if f["code"] == f"stability.{item}")


def test_the_baseline_passes_every_item_its_resumes_bit_for_bit(results):
    run, result, _ = results["baseline"]
    assert run.info.status == "FINISHED" and run.data.tags[names.PROBE] == "stability"
    assert run.data.metrics[names.probe_pass("stability")] == 1.0
    assert result["passed"] and result["findings"] == []
    figures = result["figures"]
    assert figures["items_total"] == 10 and figures["items_passed"] == 10     # long run included
    assert figures["resumes_bit_for_bit"] == 4 and figures["unsafe_loads"] == 0
    assert result["headline"] == "10/10 items"
    table = result["sections"][0]
    assert table.count("| pass |") == 10 and "bit for bit (resumed after step 18)" in table
    assert "refused it: CorruptCheckpoint" in table          # flipped bytes caught by the checksum


def test_each_lost_state_on_resume_is_caught_and_named(results):
    _, a, _ = results["planted_a"]
    _, b, _ = results["planted_b"]
    assert not a["passed"] and not b["passed"]
    rng = finding(a, "kill_between")
    assert rng["first_step"] == 7 and "RNG state lost" in rng["size"]
    optimizer = finding(a, "kill_after_checkpoint")
    assert optimizer["first_step"] == 19 and "optimizer state lost" in optimizer["size"]
    assert "param groups" in optimizer["size"]        # the LR the optimizer held was lost with it
    data = finding(a, "kill_during_write")
    assert data["first_step"] == 7 and "data position lost: step 7 trained on the samples of step 1" in data["size"]
    scheduler = finding(b, "kill_between")
    assert scheduler["first_step"] == 8 and "scheduler state lost" in scheduler["size"]   # step 7: the LR it held
    repeated = finding(b, "kill_after_checkpoint")
    assert "step 19 trained on the samples of step 18 (repeated)" in repeated["size"]
    assert "7 optimizer steps after resuming where 6 were left" in repeated["size"]


def test_a_truncated_in_place_checkpoint_a_fresh_start_a_swallowed_oom_and_a_leak_are_caught(results):
    _, a, _ = results["planted_a"]
    _, b, _ = results["planted_b"]
    in_place = finding(b, "kill_during_write")
    assert "the resume failed" in in_place["size"] and "step_00000012.pt" in in_place["size"]
    fresh = finding(a, "corrupt_truncated")
    assert fresh["size"].startswith("started again from step 1 without a word")
    oom = finding(a, "out_of_memory")
    assert oom["size"].startswith("exited 0 after the out-of-memory error at step 5 (swallowed")
    leak = finding(a, "long_run")
    assert leak["size"].startswith("memory leak: rss grows")
    assert a["figures"]["leak_low"] > 200 * 1000                   # 300 KiB a step: about 300,000 KiB per 1,000
    assert results["baseline"][1]["figures"]["leak_high"] < a["figures"]["leak_low"]


def test_the_verdicts_stability_column_shows_the_failed_items(results):
    from evalkit.analysis import store
    from evalkit.verdict import VerdictOptions, build_verdict

    run, _, uri = results["planted_b"]
    _, _, records = store.read_runs(uri, "evalkit")
    (row,) = build_verdict(records, VerdictOptions()).rows
    stability = row.dimensions["stability"]
    assert row.key.trainer == "unstable" and stability.status == "fail"
    assert stability.figure == run.data.tags[names.probe_headline("stability")]
    assert stability.figure.startswith("0/3 items: kill between, kill after checkpoint, kill during write")
