"""A kill and a resume through the real command: the baseline, SIGKILLed by evalkit's fault injector after step 30
(its step-20 checkpoint written), ends FAILED with every finished step recorded and the signal named; resumed from
that checkpoint in a fresh process it records steps 21..50 equal, bit for bit, to the shared sweep's uninterrupted
baseline run (the same ADAPTER_SMALL job). The e2e tier covers the other kills (mid-save, a rank of two, the
controller, Ctrl-C) and every adapter's own resume."""
from __future__ import annotations

import os

from adapter_runs import ADAPTER_SMALL
from helpers import PLANTED, job_runs, read_records, run_evalkit


def test_a_killed_job_keeps_its_records_and_resumes_bit_for_bit(workdir, shared_sweep):
    killed = run_evalkit(workdir, "trainer=baseline", *ADAPTER_SMALL, "train.ckpt_every=20",
                         "faults.kill_after_step=30")
    assert killed.returncode != 0 and "SIGKILL" in killed.stderr, killed.stderr[-3000:]
    client, (run,) = job_runs(workdir)
    assert run.info.status == "FAILED" and "SIGKILL" in run.data.tags["evalkit.failure_reason"]
    assert [r["step"] for r in read_records(client, run.info.run_id)] == [str(s) for s in range(1, 31)]
    checkpoint = os.path.join(run.data.tags["evalkit.checkpoint_dir"], "step_00000020.pt")

    resumed = run_evalkit(workdir, "trainer=baseline", *ADAPTER_SMALL, f"resume_from={checkpoint}")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    _, (_, again) = job_runs(workdir)
    assert again.info.status == "FINISHED"
    rest = read_records(client, again.info.run_id)
    assert [r["step"] for r in rest] == [str(s) for s in range(21, 51)]

    sweep_client, jobs = shared_sweep.runs()
    full = {r["step"]: r for r in read_records(sweep_client, jobs["baseline"].info.run_id)}
    for row in rest:   # the CSV holds repr-exact floats: string equality is bit equality
        assert (row["loss"], row["lr"], row["grad_norm"]) == \
               (full[row["step"]]["loss"], full[row["step"]]["lr"], full[row["step"]]["grad_norm"]), row["step"]


def test_a_job_past_its_time_limit_is_stopped_and_failed_with_the_reason(workdir):
    """A loop that never completes an accumulation window (the planted one that skips each epoch's short window,
    with epochs of 2 micro-batches and windows of 3) never reaches max_steps: past train.time_limit_s evalkit stops
    it and fails the run with the reason, instead of waiting forever."""
    done = run_evalkit(workdir, "trainer._target_=planted_loop.PlantedAdapter", "trainer.name=planted",
                       "+trainer.options.wrong=window.short_dropped", "task.n_train=8", "train.batch_size=4",
                       "train.grad_accum=3", "train.max_steps=5", "train.time_limit_s=8", timeout=120,
                       env={"PYTHONPATH": str(PLANTED)})
    assert done.returncode != 0, done.stderr[-3000:]
    _, (run,) = job_runs(workdir)
    reason = run.data.tags["evalkit.failure_reason"]
    assert run.info.status == "FAILED" and "time limit of 8 s (train.time_limit_s) after step 0 of 5" in reason
