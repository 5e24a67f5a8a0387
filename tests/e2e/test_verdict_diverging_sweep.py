"""Issue 11, item 1 end to end: a real sweep with a planted diverging arm fails functional and consistency,
naming the seeds and the first non-finite step, in the printed table and in verdict.html.

The diverging arm is a third-party adapter written here: the baseline loop whose model output turns NaN
from optimizer step 6 on. Its runs still FINISH (the loop runs to max_steps on NaN weights), MLflow keeps
their last finite train/loss point and a NaN val/mse; the step records keep every NaN.
"""
import contextlib
import html
import io
import json
import re
import textwrap

import pytest
from helpers import ok, run_evalkit, store_uri

from evalkit.verdict.cli import main

TINY = ["task.n_train=64", "task.n_val=32", "train.batch_size=8", "train.max_steps=10", "train.val_every=5"]
NAN_FROM_STEP = 6
ADAPTER = f'''
    from evalkit.adapters.baseline import BaselineAdapter

    NAN_FROM_STEP = {NAN_FROM_STEP}


    class DivergingAdapter(BaselineAdapter):
        """The baseline loop whose model output turns NaN from optimizer step NAN_FROM_STEP on."""

        def fit(self, job):
            forwards = {{"train": 0}}

            def poison(module, inputs, output):
                if module.training:
                    forwards["train"] += 1
                    if forwards["train"] > (NAN_FROM_STEP - 1) * job.grad_accum:
                        return output * float("nan")
                return output

            job.task.model.register_forward_hook(poison)
            super().fit(job)
'''


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("diverging")
    (workdir / "diverging_adapter.py").write_text(textwrap.dedent(ADAPTER))
    ok(run_evalkit(workdir, "seed=0,1,2", "trainer=baseline", *TINY, multirun=True))
    ok(run_evalkit(workdir, "seed=0,1,2", "trainer._target_=diverging_adapter.DivergingAdapter",
                   "trainer.name=diverging", *TINY, multirun=True, env={"PYTHONPATH": str(workdir)}))
    out = workdir / "verdict"
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main(["--tracking-uri", store_uri(workdir), "--out", str(out), "--fail-on", "functional,consistency"])
    return code, stdout.getvalue(), stderr.getvalue(), out


def table_row(stdout: str, wrapper: str) -> dict[str, str]:
    lines = stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("wrapper "))
    names = re.split(r"\s{2,}", lines[header].strip())
    line = next(line for line in lines[header + 2:] if line.startswith(wrapper + " "))
    return dict(zip(names, re.split(r"\s{2,}", line.strip())))


FUNCTIONAL = f"fail (3/3 runs non-finite from step {NAN_FROM_STEP}: seeds 0,1,2)"
CONSISTENCY = f"fail (non-finite from step {NAN_FROM_STEP} in 3/3 runs: seeds 0,1,2; sweep, no probe)"
REASON = (f"training diverged in 3/3 runs: first non-finite train loss at step {NAN_FROM_STEP} "
          f"(seed 0 step {NAN_FROM_STEP}, seed 1 step {NAN_FROM_STEP}, seed 2 step {NAN_FROM_STEP})")


def test_the_table_fails_the_diverging_arm_with_its_seeds_and_step(sweep):
    code, stdout, stderr, _ = sweep
    print(stdout)
    row = table_row(stdout, "diverging")
    assert row["functional"] == FUNCTIONAL, stdout
    assert row["consistency"] == CONSISTENCY, stdout
    assert "diverging/aligned @ mlp_regression" in stdout and REASON in stdout, stdout
    assert code == 3, stderr


def test_the_html_report_names_the_seeds_and_the_step(sweep):
    _, _, _, out = sweep
    page = (out / "verdict.html").read_text()
    for text in (FUNCTIONAL, CONSISTENCY, REASON):
        assert html.escape(text) in page, text
    data = json.loads((out / "verdict.json").read_text())
    row = next(r for r in data["rows"] if r["arm"]["trainer"] == "diverging")
    comparison = next(c for c in row["comparisons"] if c["kind"] == "equivalence")
    assert comparison["outcome"] == "non-finite"
    assert [(n["seed"], n["step"], n["where"]) for n in comparison["nonfinite"]] == \
        [(s, NAN_FROM_STEP, "train loss") for s in (0, 1, 2)]
