"""Nothing recorded may be wrong: concurrent jobs, reused run directories, the trainer's name, interrupts,
orphaned workers and the reason a run failed (issue 8, items 1-3, 5-7, 16, 18, 21). Real processes, real
signals, a real MLflow store."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from helpers import EVALKIT, job_runs, read_records, run_evalkit, wait_for_no_workers, worker_pids

TINY = ["task.n_train=64", "task.n_val=32", "train.batch_size=8", "train.val_every=0", "tracking.flush_interval_s=0.2"]
ENDLESS = ["train.max_steps=100000", *TINY]


def _env() -> dict:
    return {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "EVALKIT_DEFAULT_TRACKING_URI")}


def _start(workdir, *overrides: str, multirun: bool = False) -> subprocess.Popen:
    cmd = [*EVALKIT, *(["-m"] if multirun else []), *overrides, "tracking.progress_interval_s=1000"]
    return subprocess.Popen(cmd, cwd=workdir, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _steps_in(spool_file) -> int:
    return spool_file.read_text().count('"kind":"step"') if spool_file.exists() else 0


def _wait_for_steps(spool_file, n: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while _steps_in(spool_file) < n:
        assert time.monotonic() < deadline, f"fewer than {n} steps in {spool_file} after {timeout}s"
        time.sleep(0.2)


def _losses(client, run) -> dict[int, float]:
    return {m.step: m.value for m in client.get_metric_history(run.info.run_id, "train/loss")}


def _spooled_losses(run) -> dict[int, float]:
    spool = os.path.join(run.data.tags["evalkit.run_dir"], "spool", "records_rank0.jsonl")
    with open(spool) as fh:
        records = [json.loads(line) for line in fh]
    return {r["step"]: r["loss"] for r in records if r["kind"] == "step"}


@pytest.fixture(scope="module")
def started_together(tmp_path_factory):
    """Two jobs (seeds 0 and 1) started at the same moment in a fresh directory: no store yet, default run
    directories (Hydra's clock has one-second resolution)."""
    workdir = tmp_path_factory.mktemp("together")
    procs = [_start(workdir, "train.max_steps=30", f"seed={seed}", *TINY) for seed in (0, 1)]
    outputs = [p.communicate(timeout=300) for p in procs]
    return workdir, procs, outputs


def test_store_created_by_two_jobs_at_once(started_together):
    """Item 5: MLflow's schema migration ran twice (`duplicate column name: step`); now it is serialised."""
    workdir, procs, outputs = started_together
    for proc, (_, stderr) in zip(procs, outputs):
        assert proc.returncode == 0, stderr[-3000:]
    _, runs = job_runs(workdir)
    assert sorted(r.info.status for r in runs) == ["FINISHED", "FINISHED"]


def test_jobs_started_in_the_same_second_keep_their_own_records(started_together):
    """Item 1: two jobs shared one run directory; the run tagged seed 0 held seed 1's curve, every step twice."""
    workdir, _, _ = started_together
    client, runs = job_runs(workdir)
    assert len({r.data.tags["evalkit.run_dir"] for r in runs}) == 2
    by_seed = {r.data.tags["evalkit.seed"]: r for r in runs}
    for seed, run in by_seed.items():
        history = client.get_metric_history(run.info.run_id, "train/loss")
        assert sorted(m.step for m in history) == list(range(1, 31)), seed     # every step once
        assert _losses(client, run) == _spooled_losses(run)                    # its own curve
        with open(os.path.join(run.data.tags["evalkit.run_dir"], "job.json")) as fh:
            assert json.load(fh)["config"]["seed"] == int(seed)
    assert _losses(client, by_seed["0"]) != _losses(client, by_seed["1"])


def test_a_run_directory_in_use_is_refused(workdir):
    """Item 1 where the directories collide anyway (an explicit hydra.run.dir): the second job is refused
    with one line before it records anything; the first is untouched."""
    first = _start(workdir, "hydra.run.dir=shared", *ENDLESS)
    spool = workdir / "shared" / "spool" / "records_rank0.jsonl"
    _wait_for_steps(spool, 1)
    second = run_evalkit(workdir, "hydra.run.dir=shared", "train.max_steps=20", "seed=1", *TINY)
    assert second.returncode != 0
    assert "is in use by another evalkit job" in second.stderr and "Traceback" not in second.stderr
    assert first.poll() is None
    first.send_signal(signal.SIGTERM)
    first.communicate(timeout=120)
    client, runs = job_runs(workdir)
    assert len(runs) == 1 and runs[0].data.tags["evalkit.seed"] == "0"
    assert sorted(_losses(client, runs[0])) == list(range(1, _steps_in(spool) + 1))


def test_a_reused_run_directory_never_ships_the_previous_spool(workdir):
    """Item 2: the second run held 20 points, half of them seed 0's. The earlier job's files move to
    previous/, a resume from its checkpoints still finds them."""
    run_evalkit(workdir, "hydra.run.dir=fixed", "train.max_steps=10", "train.ckpt_every=5", "seed=0", *TINY)
    proc = run_evalkit(workdir, "hydra.run.dir=fixed", "train.max_steps=10", "train.ckpt_every=5", "seed=1", *TINY)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "moved to" in proc.stderr
    client, (first, second) = job_runs(workdir)
    assert sorted(_losses(client, second)) == list(range(1, 11))
    assert _losses(client, second) != _losses(client, first)
    assert len(read_records(client, second.info.run_id)) == 10
    (archived,) = os.listdir(workdir / "fixed" / "previous")
    assert archived.endswith(first.info.run_id)
    assert (workdir / "fixed" / "previous" / archived / "spool" / "records_rank0.jsonl").exists()
    # resume from the directory's own earlier checkpoints (moved with it) in the same directory
    proc = run_evalkit(workdir, "hydra.run.dir=fixed", "train.max_steps=10", "train.ckpt_every=5", "seed=1",
                       f"resume_from={workdir / 'fixed' / 'checkpoints' / 'step_00000005.pt'}", *TINY)
    assert proc.returncode == 0, proc.stderr[-3000:]
    client, runs = job_runs(workdir)
    assert sorted(_losses(client, runs[-1])) == list(range(6, 11))
    assert _losses(client, runs[-1]) == {s: v for s, v in _losses(client, second).items() if s > 5}


def test_a_wrapper_is_never_recorded_under_the_baselines_name(workdir):
    """Item 3: `trainer._target_=<a wrapper>` under the default trainer=baseline was tagged baseline."""
    proc = run_evalkit(workdir, "trainer._target_=evalkit.adapters.accelerate_loop.AccelerateAdapter",
                       "train.max_steps=2")
    assert proc.returncode != 0
    assert "is not the adapter of trainer=baseline" in proc.stderr and "use trainer=accelerate" in proc.stderr
    assert not (workdir / "mlflow.db").exists() or not job_runs(workdir)[1]


def _sigint_sweep(workdir):
    proc = _start(workdir, "seed=0,1", *ENDLESS, multirun=True)
    deadline = time.monotonic() + 120
    while not list(workdir.glob("multirun/*/*/0/spool/records_rank0.jsonl")):
        assert time.monotonic() < deadline
        time.sleep(0.2)
    spool = next(workdir.glob("multirun/*/*/0/spool/records_rank0.jsonl"))
    _wait_for_steps(spool, 10)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    return proc, stderr, spool


def test_ctrl_c_ships_everything_and_ends_every_run_killed(workdir):
    """Item 6: SIGINT gave a 40-line traceback, spooled steps unshipped, no artifacts, the parent RUNNING."""
    proc, stderr, spool = _sigint_sweep(workdir)
    assert proc.returncode == 130
    assert "Traceback" not in stderr and "interrupted by SIGINT" in stderr
    assert len([line for line in stderr.splitlines() if line.startswith("evalkit:")]) == 1
    client, runs = job_runs(workdir)
    parent = next(r for r in runs if r.data.tags.get("evalkit.role") == "sweep")
    children = [r for r in runs if r.data.tags.get("evalkit.role") == "job"]
    assert parent.info.status == "KILLED" and len(children) == 1       # the second job never started
    (child,) = children
    assert child.info.status == "KILLED" and "interrupted by SIGINT" in child.data.tags["evalkit.failure_reason"]
    assert sorted(_losses(client, child)) == list(range(1, _steps_in(spool) + 1))   # every spooled step
    assert len(read_records(client, child.info.run_id)) == _steps_in(spool)
    assert [a.path for a in client.list_artifacts(child.info.run_id, "logs")] == ["logs/worker_rank0.log"]
    assert not worker_pids(str(workdir))


def test_sigterm_ends_a_single_job_killed_with_its_records(workdir):
    proc = _start(workdir, "hydra.run.dir=run", *ENDLESS)
    spool = workdir / "run" / "spool" / "records_rank0.jsonl"
    _wait_for_steps(spool, 10)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 143 and "Traceback" not in stderr and "interrupted by SIGTERM" in stderr
    client, (run,) = job_runs(workdir)
    assert run.info.status == "KILLED"
    assert sorted(_losses(client, run)) == list(range(1, _steps_in(spool) + 1))


def test_sigkilled_controller_takes_its_workers_and_ship_tells_the_truth(workdir):
    """Item 7: workers trained on after their controller's SIGKILL, and evalkit-ship invented exit code 1."""
    proc = _start(workdir, "hydra.run.dir=run", *ENDLESS)
    spool = workdir / "run" / "spool" / "records_rank0.jsonl"
    _wait_for_steps(spool, 5)
    assert len(worker_pids(str(workdir / "run"))) == 1
    proc.kill()
    proc.communicate(timeout=60)
    wait_for_no_workers(str(workdir / "run"), 20)
    steps = _steps_in(spool)
    ship = subprocess.run([os.path.join(os.path.dirname(sys.executable), "evalkit-ship"), str(workdir / "run")],
                          capture_output=True, text=True, env=_env(), timeout=300)
    assert "KILLED" in ship.stdout, ship.stderr[-2000:]
    client, (run,) = job_runs(workdir)
    assert run.info.status == "KILLED"
    assert "controller stopped before its workers ended" in run.data.tags["evalkit.failure_reason"]
    assert sorted(_losses(client, run)) == list(range(1, steps + 1))


def test_a_controller_killed_while_winding_down_leaves_no_run_running(workdir):
    """Issue 44: under SLURM, scancel sends SIGTERM and, KillWait (30 s) later, SIGKILL. A controller still winding
    down then (its ranks stopped, the spool being shipped) left its run RUNNING for ever. The run ends as the
    interrupt ends it before the wind-down; evalkit-ship then completes its records all the same."""
    proc = _start(workdir, "hydra.run.dir=run", *ENDLESS, "tracking.flush_interval_s=1000")  # all ship at the end
    spool = workdir / "run" / "spool" / "records_rank0.jsonl"
    _wait_for_steps(spool, 2000)
    proc.send_signal(signal.SIGTERM)
    wait_for_no_workers(str(workdir / "run"), 60, "the ranks were not stopped")
    assert proc.poll() is None, "the controller ended before it could be killed winding down"
    proc.kill()                                    # SLURM's SIGKILL, while the spool is being shipped
    proc.communicate(timeout=60)
    client, (run,) = job_runs(workdir)
    assert run.info.status == "KILLED", "the killed controller left its run RUNNING"
    assert "interrupted by SIGTERM" in run.data.tags["evalkit.failure_reason"]
    ship = subprocess.run([os.path.join(os.path.dirname(sys.executable), "evalkit-ship"), str(workdir / "run")],
                          capture_output=True, text=True, env=_env(), timeout=300)
    assert "KILLED: interrupted by SIGTERM" in ship.stdout, ship.stdout + ship.stderr[-2000:]
    _, (run,) = job_runs(workdir)
    assert run.info.status == "KILLED" and "evalkit.winding_down" not in run.data.tags
    assert "interrupted by SIGTERM" in run.data.tags["evalkit.failure_reason"]
    assert sorted(_losses(client, run)) == list(range(1, _steps_in(spool) + 1))     # every spooled step


def test_ship_without_exit_codes_keeps_a_finished_run_finished(workdir):
    """Item 7: with the controller gone after its workers finished, the spool says they did."""
    proc = run_evalkit(workdir, "hydra.run.dir=run", "train.max_steps=6", *TINY)
    assert proc.returncode == 0, proc.stderr[-2000:]
    os.remove(workdir / "run" / "exit_codes.json")
    ship = subprocess.run([os.path.join(os.path.dirname(sys.executable), "evalkit-ship"), str(workdir / "run")],
                          capture_output=True, text=True, env=_env(), timeout=300)
    assert ship.returncode == 0 and "FINISHED" in ship.stdout, ship.stderr[-2000:]
    _, (run,) = job_runs(workdir)
    assert run.info.status == "FINISHED" and "evalkit.failure_reason" not in run.data.tags


def test_failure_reason_keeps_the_cause(workdir):
    """Item 16: `ImportError: Error loading 'nosuchmodule.Adapter':` lost the line that said why."""
    proc = run_evalkit(workdir, "trainer._target_=nosuchmodule.Adapter", "trainer.name=mine", "train.max_steps=2")
    assert proc.returncode != 0
    _, (run,) = job_runs(workdir)
    assert "No module named 'nosuchmodule'" in run.data.tags["evalkit.failure_reason"]
    assert "No module named 'nosuchmodule'" in proc.stderr


def test_a_killed_rank_is_named_not_its_peers_symptom(workdir):
    """Item 18: DDP with rank 1 SIGKILLed reported rank 0's gloo error."""
    proc = _start(workdir, "hydra.run.dir=run", "distributed=ddp", "distributed.world_size=2", *ENDLESS)
    spool = workdir / "run" / "spool" / "records_rank1.jsonl"
    _wait_for_steps(spool, 5)
    rank1 = [p for p in worker_pids(str(workdir / "run"))
             if b"RANK=1\0" in open(f"/proc/{p}/environ", "rb").read()]
    assert len(rank1) == 1
    os.kill(rank1[0], signal.SIGKILL)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode != 0
    _, (run,) = job_runs(workdir)
    assert run.data.tags["evalkit.failure_reason"].startswith("rank 1 killed by SIGKILL"), \
        run.data.tags["evalkit.failure_reason"]


def test_a_precision_mismatch_is_printed(workdir):
    """Item 21: a wrapper that runs another precision than asked was tagged, never said on the console."""
    pytest.importorskip("accelerate")
    proc = run_evalkit(workdir, "trainer=accelerate", "trainer.mode=defaults", "precision=fp16_mixed",
                       "train.max_steps=3", *TINY)
    assert proc.returncode == 0, proc.stderr[-3000:]
    _, (run,) = job_runs(workdir)
    assert run.data.tags["evalkit.precision_mismatch"] in proc.stderr
    assert "warning: accelerate ran another precision than asked" in proc.stderr
