"""What Hydra's types let through is refused before anything is recorded (issue 8, items 4, 14, 15, 20, 22, 24).

Unit tests compose real configs with Hydra's compose API (no process); one real `evalkit` process per
refusal kind and one `evalkit-eval` process show the user-facing behaviour end to end.
"""
from __future__ import annotations

import os
import subprocess
import sys

from helpers import compose_config, job_runs, run_evalkit

from evalkit.config import register_configs

register_configs()
TINY = ["train.max_steps=2", "task.n_train=64", "task.n_val=32", "train.val_every=0"]


def test_checking_a_cpu_job_before_launch_imports_no_torch():
    """The controller's process composes, validates and pre-flights a job without torch: only the workers train."""
    code = ("import sys\n"
            "from hydra import compose, initialize_config_module\n"
            "import evalkit.cli, evalkit.controller.sweep.callback\n"
            "from evalkit.config import validate\n"
            "from evalkit.controller.job.run import preflight\n"
            "for task in ('mlp_regression', 'cnn_classification', 'tiny_lm'):\n"
            "    with initialize_config_module('evalkit.conf', version_base=None):\n"
            "        cfg = compose('config', overrides=[f'task={task}', 'trainer=lightning'])\n"
            "    assert validate(cfg) == [] and preflight(cfg) is None, task\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'lightning')))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "[]"


def test_the_warning_is_recorded_as_a_tag(tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    from evalkit.controller.job.run import Controller

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    ctl = Controller(compose_config("train.max_steps=3", "observe.warmup_steps=3"), str(tmp_path / "run"), uri=uri)
    run = MlflowClient(uri).get_run(ctl.start_run())
    assert run.data.tags["evalkit.config_warnings"].startswith("observe.warmup_steps=3 >= train.max_steps=3")


# ------------------------------------------------------------------ real processes
def _job_runs_or_none(workdir):
    return job_runs(workdir)[1] if (workdir / "mlflow.db").exists() else []


def test_an_invalid_job_records_nothing_and_the_sweep_goes_on(workdir):    # item 4
    proc = run_evalkit(workdir, "train.grad_clip=-1,1.0", *TINY, multirun=True)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert ("evalkit: invalid config: train.grad_clip=-1.0 is out of range (allowed: null or > 0)"
            in proc.stderr)
    runs = _job_runs_or_none(workdir)
    jobs = [r for r in runs if r.data.tags.get("evalkit.role") == "job"]
    assert [(r.data.params["train.grad_clip"], r.info.status) for r in jobs] == [("1.0", "FINISHED")]
    parent = next(r for r in runs if r.data.tags.get("evalkit.role") == "sweep")
    assert parent.data.tags["evalkit.jobs_failed"] == "1"


def test_a_key_added_with_plus_fails_before_anything_is_recorded(workdir):    # item 14
    proc = run_evalkit(workdir, "+train.max_step=5", *TINY)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert ("evalkit: invalid config: train.max_step is not a setting (evalkit would ignore it): did you mean "
            "train.max_steps?") in proc.stderr
    assert _job_runs_or_none(workdir) == []


def test_eval_stops_at_a_bad_override_before_training(workdir):    # item 15
    script = os.path.join(os.path.dirname(sys.executable), "evalkit-eval")
    command = [script] if os.path.exists(script) else [sys.executable, "-m", "evalkit.quick"]
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    proc = subprocess.run([*command, "--trainers", "baseline", "--seeds", "2", "--", "train.max_stepz=3"],
                          cwd=workdir, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 2
    assert "evalkit-eval: bad override: train.max_stepz is not a setting: did you mean train.max_steps?" in proc.stderr
    assert "training done" not in proc.stderr and "judging" not in proc.stderr and "Traceback" not in proc.stderr
    assert not (workdir / "mlflow.db").exists() and not (workdir / "multirun").exists()
