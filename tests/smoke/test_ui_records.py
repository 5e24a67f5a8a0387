"""The session's shared sweep and its verdict (conftest's `shared_sweep`: every installed trainer at seeds 0 and 1),
read back from the store and then looked at in a real browser: the experiment's training layout, the parent's
summary with the verdict on top and a link each way, each job's description, dataset inputs and system metrics,
the addresses printed to open, and the HTML report at a narrow and a wide window.

The browser tests start `mlflow server` on 127.0.0.1 over the sweep's store and drive Debian's Chromium with
Playwright; they save screenshots under test-artifacts/ui/ (or $EVALKIT_TEST_ARTIFACTS/ui/)."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from adapter_runs import ADAPTER_SMALL
from helpers import EVALKIT, REPO, store_uri
from team import MlflowServer

from evalkit import names

STEPS = 50                                            # ADAPTER_SMALL's train.max_steps
N_TRAIN = 512                                         # and its task.n_train
assert f"train.max_steps={STEPS}" in ADAPTER_SMALL and f"task.n_train={N_TRAIN}" in ADAPTER_SMALL


@pytest.fixture(scope="module")
def sweep(shared_sweep):
    client, jobs = shared_sweep.jobs()
    _, parent, verdict_run = shared_sweep.verdict()
    wrappers = [t for t in shared_sweep.trainers if t != "baseline"]
    if not wrappers:
        pytest.skip("no wrapper installed: pip install -e '.[all]'")
    return {"client": client, "exp": client.get_experiment(parent.info.experiment_id),
            "stderr": shared_sweep.stderr, "verdict_stderr": shared_sweep.verdict_stderr,
            "workdir": shared_sweep.folder, "parent": parent, "jobs": jobs, "verdict_run": verdict_run,
            "wrapper": "ignite" if "ignite" in wrappers else wrappers[0], "trainers": shared_sweep.trainers}


def test_the_experiment_opens_in_the_training_layout_with_a_description(sweep):
    tags = sweep["exp"].tags
    assert tags[names.MLFLOW_EXPERIMENT_KIND] == "custom_model_development"
    assert "sweep-<id>" in tags[names.MLFLOW_NOTE]


def test_the_sweep_parent_shows_each_wrapper_and_the_verdict_before_anyone_expands_it(sweep):
    parent, verdict_run = sweep["parent"], sweep["verdict_run"]
    metrics = parent.data.metrics
    wrapper = sweep["wrapper"]
    for arm in ("baseline.aligned", f"{wrapper}.aligned"):
        assert metrics[f"summary/{arm}/jobs_finished"] == 2
        assert metrics[f"summary/{arm}/train_loss"] > 0 and metrics[f"summary/{arm}/val_mse"] > 0
    note = parent.data.tags[names.MLFLOW_NOTE]
    assert note.startswith("## Verdict\n\n| wrapper | mode | runs | task | functional |")
    assert f"| {wrapper} | aligned | 2/2 | mlp_regression |" in note
    verdict_link = f"#/experiments/{sweep['exp'].experiment_id}/runs/{verdict_run.info.run_id}"
    assert verdict_link in note and parent.data.tags[names.VERDICT_RUN_ID] == verdict_run.info.run_id
    assert "## Jobs" in note and f"| {wrapper} | aligned | 2 | 2 |" in note
    assert f"runs/{parent.info.run_id})" in verdict_run.data.tags[names.MLFLOW_NOTE]


def test_each_job_says_what_it_was_in_one_line(sweep):
    notes = {(r.data.tags[names.TRAINER], r.data.tags[names.SEED]): r.data.tags[names.MLFLOW_NOTE]
             for r in sweep["jobs"]}
    assert len(notes) == 2 * len(sweep["trainers"]) == len(sweep["jobs"])
    assert all("\n" not in n and "FINISHED after" in n and f"{STEPS} steps" in n for n in notes.values())
    assert notes["baseline", "0"].startswith(
        "baseline (aligned) · mlp_regression · cpu, batch 32×1, fp32, 1 rank · seed 0 · ")
    wrapper = sweep["wrapper"]
    assert notes[wrapper, "1"].startswith(f"{wrapper} (aligned) · mlp_regression · ") and " · seed 1 · " in \
        notes[wrapper, "1"]


def test_each_job_logs_its_data_as_dataset_inputs_the_same_for_every_wrapper_at_one_seed(sweep):
    digests = {}
    for run in sweep["jobs"]:
        inputs = run.inputs.dataset_inputs
        assert [(i.dataset.name, i.tags[0].value) for i in inputs] == \
            [("mlp_regression-train", "training"), ("mlp_regression-val", "evaluation")]
        source = json.loads(inputs[0].dataset.source)
        assert source["seed"] == int(run.data.tags[names.SEED]) and source["arguments"]["n_train"] == N_TRAIN
        assert json.loads(inputs[0].dataset.profile) == {"num_rows": N_TRAIN}
        digests.setdefault(run.data.tags[names.SEED], {})[run.data.tags[names.TRAINER]] = inputs[0].dataset.digest
    assert all(len(set(d.values())) == 1 for d in digests.values()), digests
    assert digests["0"]["baseline"] != digests["1"]["baseline"]


def test_each_job_has_system_metrics_sampled_by_its_controller(sweep):
    client = sweep["client"]
    for run in sweep["jobs"]:
        cpu = client.get_metric_history(run.info.run_id, "system/cpu_utilization_percentage")
        assert len(cpu) >= 2 and all(0 <= p.value <= 100 for p in cpu)
        assert "system/system_memory_usage_megabytes" in run.data.metrics


def test_the_commands_print_the_address_to_open(sweep):
    exp, parent = sweep["exp"].experiment_id, sweep["parent"].info.run_id
    sweep_line = (f"in the MLflow UI: http://127.0.0.1:5000/#/experiments/{exp}/runs/{parent}"
                  "?workflowType=machine_learning (serve the store first")
    assert sweep_line in sweep["stderr"]
    verdict_id = sweep["verdict_run"].info.run_id
    assert f"#/experiments/{exp}/runs/{verdict_id}" in sweep["verdict_stderr"]


def test_a_single_job_prints_its_own_address_and_quiet_prints_nothing_else(tmp_path):
    proc = subprocess.run([*EVALKIT, "train.max_steps=6", "task.n_train=64", "task.n_val=16",
                           "tracking.progress=quiet"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("[evalkit] run ") and "/#/experiments/1/runs/" in lines[0], lines


# ------------------------------------------------------------------ in a real browser
SHOTS = Path(os.environ.get("EVALKIT_TEST_ARTIFACTS") or REPO / "test-artifacts") / "ui"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
UI_WAIT_MS = 60_000


@pytest.fixture(scope="module")
def browser():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("BROWSER TESTS NOT RUN: no Chromium on this machine (.ci/run installs Debian's `chromium` as root; "
                    "elsewhere: apt-get install -y chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("BROWSER TESTS NOT RUN: playwright is not installed (pip install -e '.[dev]')")
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        yield instance
        instance.close()


@pytest.fixture(scope="module")
def server(sweep):
    """`mlflow server` over the sweep's store, on a free port of 127.0.0.1; its base URL."""
    server = MlflowServer(sweep["workdir"], store_uri(sweep["workdir"])).start()
    yield server.url
    server.stop()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1600, "height": 1000})
    yield context.new_page()
    context.close()


def _address(line_start: str, stderr: str, server: str) -> str:
    """The address a command printed after `line_start`, pointed at the test's server."""
    line = next(line for line in stderr.splitlines() if line_start in line)
    address = line.split(line_start, 1)[1].split()[0]
    return address.replace("http://127.0.0.1:5000", server)


def test_the_printed_address_opens_the_runs_table_in_the_training_layout_with_the_sweep_summary(sweep, server, page):
    page.goto(_address("its runs with the summary columns: ", sweep["stderr"], server))
    parent = sweep["parent"]
    # the view's columns, as the sweep stored them: the first few are on screen (the grid draws only those)
    view = json.loads(sweep["exp"].tags[f"mlflow.sharedViewState.evalkit-{parent.data.tags[names.SWEEP_ID]}-table"])
    summary = [c.split("`")[1] for c in view["selectedColumns"] if c.startswith("metrics.`summary/")]
    assert {f"summary/{t}.aligned/train_loss" for t in sweep["trainers"]} <= set(summary), summary
    first = next(c for c in summary if c.endswith("/train_loss"))
    page.get_by_text(parent.info.run_name[:12]).first.wait_for(timeout=UI_WAIT_MS)
    page.get_by_text(first).first.wait_for(timeout=UI_WAIT_MS)
    page.screenshot(path=SHOTS / "runs_table.png")
    text = page.inner_text("body")
    assert "Model training" in text and "Evaluation runs" not in text and "Judges" not in text    # not GenAI
    value = parent.data.metrics[first]
    assert str(value)[:8] in text, (first, value, text[-2000:])
    # the parent row's expander: the icon button in its run-name cell
    page.locator(f"[row-id='{parent.info.run_id}'] button[data-component-id*='runnamecellrenderer']").first.click()
    for job in sweep["jobs"]:
        page.get_by_text(job.info.run_name).first.wait_for(timeout=UI_WAIT_MS)
    page.screenshot(path=SHOTS / "runs_expanded.png")


def test_the_chart_view_draws_each_wrappers_train_loss_by_optimizer_step(sweep, server, page):
    page.goto(_address("its wrappers' curves side by side: ", sweep["stderr"], server))
    search = page.get_by_placeholder("Search metric charts")
    search.wait_for(timeout=UI_WAIT_MS)
    search.fill("train/loss")
    page.get_by_text("train/loss", exact=True).first.wait_for(timeout=UI_WAIT_MS)
    page.wait_for_timeout(1500)
    page.screenshot(path=SHOTS / "charts_train_loss.png")
    text = page.inner_text("body")
    legend = [f"evalkit.trainer: {t}" for t in sweep["trainers"]]
    assert all(entry in text for entry in legend), text[-2000:]


def test_a_jobs_page_shows_its_description_dataset_and_system_metrics(sweep, server, page):
    job = next(r for r in sweep["jobs"] if r.data.tags[names.TRAINER] == sweep["wrapper"])
    page.goto(f"{server}/#/experiments/{sweep['exp'].experiment_id}/runs/{job.info.run_id}"
              "?workflowType=machine_learning")
    page.get_by_text(job.data.tags[names.MLFLOW_NOTE][:40]).first.wait_for(timeout=UI_WAIT_MS)
    page.get_by_text("system/cpu_utilization_percentage").first.wait_for(timeout=UI_WAIT_MS)
    text = page.inner_text("body")
    assert "mlp_regression-train" in text, text[:3000]
    page.screenshot(path=SHOTS / "job_page.png")


def test_the_verdict_report_opens_from_the_verdict_runs_artifacts(sweep, server, page):
    verdict = sweep["verdict_run"]
    page.goto(f"{server}/#/experiments/{sweep['exp'].experiment_id}/runs/{verdict.info.run_id}/artifacts/"
              "verdict/verdict.html?workflowType=machine_learning")
    report = page.frame_locator("iframe").first
    report.get_by_text("At a glance").wait_for(timeout=UI_WAIT_MS)
    assert "your loop" in report.locator("section.wrapper", has_text=sweep["wrapper"]).first.inner_text()
    page.screenshot(path=SHOTS / "verdict_artifact.png")


@pytest.mark.parametrize("width,height", [(390, 844), (1440, 900)])
def test_the_html_report_answers_which_wrapper_which_dimension_why_on_its_first_screen(sweep, browser, width,
                                                                                       height):
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.goto((sweep["workdir"] / "report" / "verdict.html").as_uri())
    glance = page.locator("h2", has_text="At a glance")
    first = page.locator("section.wrapper").first                       # the first wrapper's paragraph in plain words
    assert glance.bounding_box()["y"] < height and first.bounding_box()["y"] < height
    assert "your loop" in first.inner_text() and not re.search(r"[\w.]+/[\w./]+=", first.inner_text())
    wide = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert wide <= 1, f"the page scrolls sideways by {wide} px at {width} px"    # tables scroll in their box
    images = page.evaluate("Array.from(document.images).map(i => [i.complete && i.naturalWidth > 0, "
                           "i.getBoundingClientRect().width <= window.innerWidth])")
    assert images and all(ok and fits for ok, fits in images)
    assert page.locator("p.caption").count() >= 2
    page.screenshot(path=SHOTS / f"report_{width}px.png", full_page=False)
    context.close()
