"""The adapter tests' runs through the real command: the settings they share, the session's shared sweep of
every installed wrapper beside the baseline, bf16 with accumulation, a run resumed from its step-20 checkpoint."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from helpers import job_runs, read_records, run_evalkit, run_ok, store_uri


def assert_bit_identical_to_baseline(client, wrapper, baseline, steps: int, val_steps: list[str]) -> None:
    """Aligned mode, fp32, one process: loss (within 1e-6 relative, and in fact to the last bit: the CSV
    holds repr-exact floats), LR, grad norm, micro-batches and validation equal the baseline's."""
    ours, theirs = read_records(client, wrapper.info.run_id), read_records(client, baseline.info.run_id)
    assert [r["step"] for r in ours] == [r["step"] for r in theirs] == [str(s) for s in range(1, steps + 1)]
    worst = max(abs(float(a["loss"]) - float(b["loss"])) / abs(float(b["loss"])) for a, b in zip(ours, theirs))
    assert worst <= 1e-6
    for a, b in zip(ours, theirs):
        assert (a["loss"], a["lr"], a["grad_norm"], a["micro_batches"]) == \
               (b["loss"], b["lr"], b["grad_norm"], b["micro_batches"]), a["step"]

    def val(run):
        return [(r["step"], r["mse"]) for r in read_records(client, run.info.run_id, "val_rank0.csv")]

    assert val(wrapper) == val(baseline) and [s for s, _ in val(wrapper)] == val_steps


# Shared settings of the adapter tests: 50 steps on a small split; resume runs stop at 40 on 2 ranks.
ADAPTER_SMALL = ["task.n_train=512", "task.n_val=128", "train.max_steps=50", "train.val_every=25"]
ADAPTER_RESUME = ["task.n_train=512", "task.n_val=128", "train.max_steps=40", "train.val_every=25",
                  "distributed=ddp", "distributed.world_size=2"]


def aligned_with_baseline(workdir, *trainer: str):
    """The wrapper, then the baseline, with ADAPTER_SMALL in one workdir: (client, wrapper, baseline)."""
    client, wrapper = run_ok(workdir, *trainer, *ADAPTER_SMALL)
    _, baseline = run_ok(workdir, "trainer=baseline", *ADAPTER_SMALL)
    return client, wrapper, baseline


SHARED_SWEEP = ["seed=0,1", *ADAPTER_SMALL, "tracking.system_metrics_interval_s=0.5"]


class SharedSweep:
    """The session's shared store (conftest's `shared_sweep`): the baseline and every installed wrapper, aligned
    fp32 on ADAPTER_SMALL at seeds 0 and 1 (SHARED_SWEEP), one `evalkit -m` into `folder`/mlflow.db, then
    `evalkit-verdict` on it (its report in `folder`/report). Read it, never write to it."""

    def __init__(self, folder: Path):
        import json

        self.folder = folder
        done = json.loads((folder / "sweep.json").read_text())
        self.trainers, self.returncode, self.stderr = done["trainers"], done["returncode"], done["stderr"]
        self.verdict_returncode, self.verdict_stderr = done["verdict_returncode"], done["verdict_stderr"]

    def jobs(self) -> tuple:
        """(client, every job run, oldest first); fails with the sweep's own error output if the sweep failed."""
        assert self.returncode == 0, self.stderr[-4000:]
        client, runs = job_runs(self.folder)
        jobs = [r for r in runs if r.data.tags.get("evalkit.role") == "job"]
        assert sorted({r.data.tags["evalkit.trainer"] for r in jobs}) == sorted(self.trainers), self.trainers
        return client, jobs

    def runs(self) -> tuple:
        """(client, {trainer: its seed-0 job run})."""
        client, jobs = self.jobs()
        return client, {r.data.tags["evalkit.trainer"]: r for r in jobs if r.data.tags["evalkit.seed"] == "0"}

    def aligned(self, trainer: str) -> tuple:
        """(client, the wrapper's run, the baseline's run): what `aligned_with_baseline` runs, read from here."""
        client, jobs = self.runs()
        return client, jobs[trainer], jobs["baseline"]

    def verdict(self) -> tuple:
        """(client, the sweep's parent run, its verdict run), re-read from the store."""
        assert self.verdict_returncode == 0, self.verdict_stderr[-4000:]
        client, runs = job_runs(self.folder)
        (parent,) = [r for r in runs if r.data.tags.get("evalkit.role") == "sweep"]
        (verdict,) = [r for r in runs if r.data.tags.get("evalkit.role") == "verdict"]
        return client, parent, verdict


def shared_sweep_in(folder: Path) -> SharedSweep:
    """The shared sweep in `folder`, built there unless a process of this session already has (an exclusive lock
    beside it: pytest-xdist's workers wait for the one that builds it)."""
    import fcntl
    import json

    from evalkit.trainers import installed_trainers

    folder.mkdir(parents=True, exist_ok=True)
    with open(folder.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / "sweep.json").exists():
            trainers = installed_trainers()[0]
            proc = run_evalkit(folder, f"trainer={','.join(trainers)}", *SHARED_SWEEP, multirun=True, timeout=1500)
            verdict = _verdict_of(folder) if proc.returncode == 0 else None
            (folder / "sweep.json").write_text(json.dumps(
                {"trainers": trainers, "returncode": proc.returncode, "stderr": proc.stderr,
                 "verdict_returncode": verdict.returncode if verdict else None,
                 "verdict_stderr": verdict.stderr if verdict else "the sweep failed: no verdict"}))
    return SharedSweep(folder)


def _verdict_of(folder: Path) -> subprocess.CompletedProcess:
    """`evalkit-verdict` on the store's one sweep, its report into `folder`/report."""
    client, runs = job_runs(folder)
    (parent,) = [r for r in runs if r.data.tags.get("evalkit.role") == "sweep"]
    script = os.path.join(os.path.dirname(sys.executable), "evalkit-verdict")
    return subprocess.run([script, "--tracking-uri", store_uri(folder), "--parent-run-id", parent.info.run_id,
                           "--out", str(folder / "report")], capture_output=True, text=True, cwd=folder, timeout=300)


def assert_resumed_at_step_21(client, continuous, resumed):
    """A run resumed from the step-20 checkpoint records steps 21..40 and step 21's LR is the continuous
    run's; returns (continuous rows by step, resumed rows) for further checks."""
    full = {r["step"]: r for r in read_records(client, continuous.info.run_id)}
    rest = read_records(client, resumed.info.run_id)
    assert rest[0]["step"] == "21" and rest[-1]["step"] == "40"
    assert rest[0]["lr"] == full["21"]["lr"]
    return full, rest


STEP_20 = re.compile(r"(?<![0-9])0*20(?![0-9])")


def checkpoint_after_step_20(ckpt_dir: str) -> str:
    """The entry a wrapper wrote for step 20 in its checkpoint directory, whatever it names it (`step_00000020.pt`,
    `checkpoint-20`, a `save_state` folder), its checksum files aside: the one a resume from step 20 is given."""
    from evalkit.contract.checkpoint import CHECKSUM_SUFFIX

    found = [n for n in sorted(os.listdir(ckpt_dir)) if STEP_20.search(n) and not n.endswith(CHECKSUM_SUFFIX)]
    assert len(found) == 1, (ckpt_dir, os.listdir(ckpt_dir))
    return os.path.join(ckpt_dir, found[0])


class AdapterRuns:
    """One wrapper's runs of the adapter contract (tests/e2e/test_adapters.py), trained once per test session in
    `folder` whichever test asks first (a lock beside it: pytest-xdist's workers wait for the one that trains), then
    read back from its store: `bf16` (bf16_mixed with grad_accum=2 on ADAPTER_SMALL) and `ddp` (ADAPTER_RESUME at
    world size 2 checkpointing every 20 steps, then a run resumed from its step-20 checkpoint)."""

    def __init__(self, folder: Path, trainer: str):
        self.folder, self.trainer = folder, trainer

    def _trained(self, kind: str, train) -> Path:
        import fcntl

        where = self.folder / f"{self.trainer}-{kind}"
        where.mkdir(parents=True, exist_ok=True)
        with open(where.with_suffix(".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (where / "done").exists():
                train(where)
                (where / "done").write_text("")
        return where

    def bf16(self) -> tuple:
        """(client, the run), which may have ended FAILED (a refusal: the test reads its reason)."""
        where = self._trained("bf16", lambda w: run_evalkit(w, f"trainer={self.trainer}", *ADAPTER_SMALL,
                                                              "precision=bf16_mixed", "train.grad_accum=2"))
        client, (run,) = job_runs(where)
        return client, run

    def ddp(self) -> tuple:
        """(client, the continuous run, the resumed run or None, the step-20 checkpoint or None)."""
        def train(where: Path) -> None:
            run_evalkit(where, f"trainer={self.trainer}", *ADAPTER_RESUME, "train.ckpt_every=20")
            _, (continuous,) = job_runs(where)
            if continuous.info.status == "FINISHED":
                path = checkpoint_after_step_20(continuous.data.tags["evalkit.checkpoint_dir"])
                (where / "checkpoint").write_text(path)
                run_evalkit(where, f"trainer={self.trainer}", *ADAPTER_RESUME, f"resume_from={path}")

        where = self._trained("ddp", train)
        client, runs = job_runs(where)
        checkpoint = (where / "checkpoint").read_text() if (where / "checkpoint").exists() else None
        return client, runs[0], runs[1] if len(runs) > 1 else None, checkpoint


def assert_lightning_ranks_joined(client, run) -> None:
    """Lightning/Fabric at world size 2: exactly evalkit's two workers joined (each log announces its own
    rank once, nobody else's), validation merged over both ranks, 32 samples per rank and step."""
    run_dir = run.data.tags["evalkit.run_dir"]
    logs = sorted(f for f in os.listdir(run_dir) if re.fullmatch(r"worker_rank\d+\.log", f))
    assert logs == ["worker_rank0.log", "worker_rank1.log"]
    for rank, name in enumerate(logs):
        with open(os.path.join(run_dir, name)) as fh:
            joins = re.findall(r"GLOBAL_RANK: (\d+), MEMBER: (\d+)/(\d+)", fh.read())
        assert joins == [(str(rank), str(rank + 1), "2")]
    val = read_records(client, run.info.run_id, "val_rank0.csv")
    assert all(r["ranks"] == "2" and r["samples"] == "128" for r in val)
    assert all(r["samples"] == "32" for r in read_records(client, run.info.run_id))
