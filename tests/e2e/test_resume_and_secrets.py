"""Resume compatibility (a checkpoint continues only the run that wrote it), adapter class checks, and secret
redaction by value shape. Pure functions on fabricated configs; a few real runs on one tiny baseline job."""
from __future__ import annotations

import glob
import json
import os

import pytest
from helpers import job_runs, read_records, run_evalkit
from team import NOTED_ENV

from evalkit.config import register_configs
from evalkit.secrets import REDACTED

register_configs()


# ------------------------------------------------------------------ item 23 and 10 through the real command
SMALL = ["task.n_train=64", "task.n_val=32", "train.batch_size=8", "train.val_every=0", "train.ckpt_every=5"]
TOKENS = {"hf": "hf_aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3x", "github": "ghp_Zy9Xw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcBa",
          "aws": "AKIAQ3EXAMPLE7KEY4NZ", "password": "hunter2pass"}


@pytest.fixture(scope="module")
def step5(tmp_path_factory):
    """One baseline run of 10 steps checkpointing at 5 and 10: (workdir, client, run, its step-5 checkpoint)."""
    workdir = tmp_path_factory.mktemp("resume")
    proc = run_evalkit(workdir, *SMALL, "train.max_steps=10")
    assert proc.returncode == 0, proc.stderr[-3000:]
    client, (run,) = job_runs(workdir)
    return workdir, client, run, os.path.join(run.data.tags["evalkit.checkpoint_dir"], "step_00000005.pt")


def _workers_started(workdir) -> int:
    return len(glob.glob(os.path.join(workdir, "outputs", "*", "*", "worker_rank*.log")))


@pytest.mark.parametrize("overrides,message", [
    (["train.max_steps=3"], "train.max_steps=3 is not above the checkpoint's step 5 (nothing would train): resume "
                            "with train.max_steps=10, or start without resume_from"),
    (["train.max_steps=10", "seed=1"], "seed=1, but the checkpoint was written with seed=0: resume with seed=0"),
    (["train.max_steps=10", "train.batch_size=16"], "train.batch_size=16, but the checkpoint was written with "
                                                    "train.batch_size=8: resume with train.batch_size=8"),
    (["train.max_steps=10", "trainer=ignite"], "it was written by trainer baseline "
                                               "(evalkit.adapters.baseline.BaselineAdapter), this job runs ignite"),
])
def test_an_incompatible_resume_is_refused_before_any_worker_starts(step5, overrides, message):
    workdir, _, _, checkpoint = step5
    before = _workers_started(workdir)
    proc = run_evalkit(workdir, *SMALL, *overrides, f"resume_from={checkpoint}")
    assert proc.returncode != 0
    assert f"resume_from={checkpoint} cannot continue the run that wrote it: " in proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr
    _, runs = job_runs(workdir)
    assert runs[-1].info.status == "FAILED" and message in runs[-1].data.tags["evalkit.failure_reason"]
    assert _workers_started(workdir) == before


def test_a_missing_resume_path_is_named_not_called_corrupt(step5):
    workdir, _, _, checkpoint = step5
    missing = checkpoint.replace("step_00000005", "step_00000099")
    before = _workers_started(workdir)
    proc = run_evalkit(workdir, *SMALL, "train.max_steps=10", f"resume_from={missing}")
    assert proc.returncode != 0 and f"resume_from={missing} does not exist: " in proc.stderr
    assert "CorruptCheckpoint" not in proc.stderr and _workers_started(workdir) == before


def test_a_compatible_resume_continues_and_records_where_it_came_from(step5):
    workdir, client, source, checkpoint = step5
    proc = run_evalkit(workdir, *SMALL, "train.max_steps=10", f"resume_from={checkpoint}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    _, runs = job_runs(workdir)
    resumed = runs[-1]
    assert [r["step"] for r in read_records(client, resumed.info.run_id)] == ["6", "7", "8", "9", "10"]
    tags = resumed.data.tags
    assert tags["evalkit.resumed_from"] == checkpoint and tags["evalkit.resumed_at_step"] == "5"
    assert tags["evalkit.resumed_from_run"] == source.info.run_id


def test_token_shaped_options_reach_neither_params_nor_the_resolved_config(tmp_path):
    """Token-shaped values under neutral keys of trainer.options (item 19; tests/planted/noted_loop.py takes them)."""
    proc = run_evalkit(tmp_path, *SMALL, "train.max_steps=2", "trainer._target_=noted_loop.NotedAdapter",
                       "trainer.name=noted", f"+trainer.options.note={TOKENS['hf']}",
                       f"+trainer.options.keys=[plain,{TOKENS['github']},{TOKENS['aws']}]",
                       f"+trainer.options.mirror='https://bob:{TOKENS['password']}@example.com/x'", env=NOTED_ENV)
    assert proc.returncode == 0, proc.stderr[-3000:]
    client, (run,) = job_runs(tmp_path)
    params = json.dumps(run.data.params)
    resolved = open(client.download_artifacts(run.info.run_id, "config/resolved.yaml")).read()
    for recorded in (params, resolved):
        assert not [name for name, token in TOKENS.items() if token in recorded], recorded
    assert run.data.params["trainer.options.note"] == REDACTED
    assert run.data.params["trainer.options.mirror"] == f"https://bob:{REDACTED}@example.com/x"
    assert "plain" in run.data.params["trainer.options.keys"] and "plain" in resolved
