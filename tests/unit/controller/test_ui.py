"""What users see, piece by piece: the experiment's layout, addresses to open, the sweep parent's summary and
verdict, the task's data as dataset inputs, system metrics from the controller, and the progress lines."""
from __future__ import annotations

import io
import json
import time

import pytest
from helpers import bundled_task_arguments, compose_config

from evalkit import names
from evalkit.controller import progress, tracking, ui
from evalkit.controller.sweep import summary


@pytest.fixture
def client(tmp_path):
    return tracking.open_client(f"sqlite:///{tmp_path}/mlflow.db")


def test_the_experiment_opens_in_the_training_layout_and_a_description_a_user_wrote_is_kept(client):
    exp = tracking.experiment_id(client, "evalkit")
    tags = client.get_experiment(exp).tags
    assert tags[names.MLFLOW_EXPERIMENT_KIND] == "custom_model_development"
    assert "baseline" in tags[names.MLFLOW_NOTE] and "verdict.html" in tags[names.MLFLOW_NOTE]
    client.set_experiment_tag(exp, names.MLFLOW_NOTE, "our team's notes")
    client.set_experiment_tag(exp, names.MLFLOW_EXPERIMENT_KIND, "genai_development")
    assert tracking.experiment_id(client, "evalkit") == exp
    tags = client.get_experiment(exp).tags
    assert tags[names.MLFLOW_NOTE] == "our team's notes"
    assert tags[names.MLFLOW_EXPERIMENT_KIND] == "custom_model_development"


def test_addresses_name_the_server_without_credentials_or_the_command_that_serves_a_local_store():
    layout = "?workflowType=machine_learning"     # MLflow 3.17 opens its GenAI pages without it
    server = ui.open_hint("sweep s", "http://bob:s3cret@mlflow.example:5000/", "3", "abc")
    assert server == f"[evalkit] sweep s in the MLflow UI: http://mlflow.example:5000/#/experiments/3/runs/abc{layout}"
    local = ui.open_hint("run r", "sqlite:////data/mlflow.db", "1", "r")
    assert local.startswith(f"[evalkit] run r in the MLflow UI: http://127.0.0.1:5000/#/experiments/1/runs/r{layout}")
    assert local.endswith("(serve the store first: mlflow server --backend-store-uri sqlite:////data/mlflow.db)")
    pg = ui.open_hint("run r", "postgresql://evalkit:pw123@db/mlflow", "1", "r")
    assert "pw123" not in pg and "postgresql://evalkit:***@db/mlflow" in pg
    assert ui.view_address("http://h:5000", "2", "k", charts=True) == \
        f"http://h:5000/#/experiments/2/runs{layout}&viewStateShareKey=k&compareRunsMode=CHART"


def test_a_sweep_shares_a_table_view_with_its_summary_columns_and_a_chart_view_grouped_by_wrapper(client):
    exp = tracking.experiment_id(client, "evalkit")
    keys = ui.share_views(client, exp, "s1", ["summary/ignite.aligned/train_loss"], charts=True)
    assert keys == {"table": "evalkit-s1-table", "charts": "evalkit-s1-charts"}
    tags = client.get_experiment(exp).tags
    table = json.loads(tags["mlflow.sharedViewState.evalkit-s1-table"])
    assert table["selectedColumns"] == ["attributes.`Dataset`", "metrics.`summary/ignite.aligned/train_loss`"]
    charts = json.loads(tags["mlflow.sharedViewState.evalkit-s1-charts"])
    assert charts["groupBy"]["groupByKeys"] == [{"mode": "tag", "groupByData": "evalkit.trainer"},
                                                {"mode": "tag", "groupByData": "evalkit.mode"}]
    assert charts["searchFilter"] == "tags.`evalkit.sweep_id` = 's1' and tags.`evalkit.role` = 'job'"
    assert ui.share_views(client, exp, "p1", [], charts=False) == {"table": "evalkit-p1-table"}


def _job(client, exp, parent, trainer, status, loss, val, sps):
    run = client.create_run(exp, tags={names.ROLE: names.ROLE_JOB, names.TRAINER: trainer, names.MODE: "aligned",
                                       "mlflow.parentRunId": parent})
    rid = run.info.run_id
    tracking.log_metrics(client, rid, [tracking.metric(names.TRAIN_LOSS, loss + 1, 0),
                                       tracking.metric(names.TRAIN_LOSS, loss, 9),
                                       tracking.metric("val/mse", val, 9),
                                       tracking.metric(names.PERF_SAMPLES_PER_S, sps, 0)])
    client.set_terminated(rid, status)


def test_a_sweep_parent_summarizes_its_jobs_per_wrapper_and_keeps_the_verdict_on_top(client):
    exp = tracking.experiment_id(client, "evalkit")
    parent = client.create_run(exp).info.run_id
    _job(client, exp, parent, "baseline", "FINISHED", 0.10, 0.20, 100.0)
    _job(client, exp, parent, "baseline", "FINISHED", 0.30, 0.40, 300.0)
    _job(client, exp, parent, "ignite", "FINISHED", 0.50, 0.60, 50.0)
    _job(client, exp, parent, "ignite", "FAILED", 9.0, 9.0, 1.0)       # a failed job counts, its figures do not
    columns, trained = summary.summarize(client, parent, "sweep s1 (FINISHED): 4 jobs")
    assert trained and sorted(columns) == ["summary/baseline.aligned/train_loss", "summary/baseline.aligned/val_mse",
                                           "summary/ignite.aligned/train_loss", "summary/ignite.aligned/val_mse"]
    run = client.get_run(parent)
    metrics = run.data.metrics
    assert metrics["summary/baseline.aligned/train_loss"] == pytest.approx(0.2)
    assert metrics["summary/baseline.aligned/val_mse"] == pytest.approx(0.3)
    assert metrics["summary/ignite.aligned/samples_per_s"] == pytest.approx(50.0)
    assert metrics["summary/ignite.aligned/jobs_finished"] == 1
    note = run.data.tags[names.MLFLOW_NOTE]
    assert "| baseline | aligned | 2 | 2 | 0.2 | 200 | 0.3 |" in note
    assert "| ignite | aligned | 2 | 1 | 0.5 | 50 | 0.6 |" in note
    summary.put_verdict(client, parent, "| wrapper | semantics |\n|---|---|\n| ignite | pass |", "v1")
    summary.summarize(client, parent, "sweep s1 (FINISHED): 4 jobs, summarized again")
    run = client.get_run(parent)
    note = run.data.tags[names.MLFLOW_NOTE]
    assert note.startswith("## Verdict\n\n| wrapper | semantics |") and note.count("## Verdict") == 1
    assert "summarized again" in note and "| ignite | aligned | 2 | 1 |" in note
    assert run.data.tags[names.VERDICT_RUN_ID] == "v1"
    summary.put_verdict(client, parent, "| a newer verdict |", "v2")
    note = client.get_run(parent).data.tags[names.MLFLOW_NOTE]
    assert note.count("## Verdict") == 1 and "a newer verdict" in note and "| ignite | pass |" not in note


def test_a_description_too_long_for_mlflow_is_cut_at_a_line_and_says_so():
    note = "\n".join(f"| row {i} | {'x' * 60} |" for i in range(200))
    cut = summary.fit(note, 2000)
    assert len(cut) <= 2000 and cut.endswith("the verdict run)")
    assert all(line.endswith("|") for line in cut.split("\n\n…")[0].splitlines())


def test_the_tasks_data_is_logged_as_dataset_inputs_whose_spec_regenerates_it(client):
    from mlflow.data.schema import TensorDatasetSchema

    from evalkit.tasks import catalog
    from evalkit.tasks.datasets import describe

    args = {**bundled_task_arguments("mlp_regression"), "n_train": 64, "n_val": 16}
    first = describe(catalog.mlp_regression(3, **args), "evalkit.tasks.catalog.mlp_regression", 3, args)
    again = describe(catalog.mlp_regression(3, **args), "evalkit.tasks.catalog.mlp_regression", 3, args)
    other = describe(catalog.mlp_regression(4, **args), "evalkit.tasks.catalog.mlp_regression", 4, args)
    assert [d["digest"] for d in first] == [d["digest"] for d in again]
    assert {d["digest"] for d in first}.isdisjoint(d["digest"] for d in other)
    assert [(d["name"], d["context"], d["rows"]) for d in first] == \
        [("mlp_regression-train", "training", 64), ("mlp_regression-val", "evaluation", 16)]
    exp = tracking.experiment_id(client, "evalkit")
    rid = client.create_run(exp).info.run_id
    ui.log_datasets(client, rid, json.loads(json.dumps(first)))     # as read back from the spool's task.json
    inputs = client.get_run(rid).inputs.dataset_inputs
    assert [(i.dataset.name, i.tags[0].value) for i in inputs] == \
        [("mlp_regression-train", "training"), ("mlp_regression-val", "evaluation")]
    schema = TensorDatasetSchema.from_dict(json.loads(inputs[0].dataset.schema))
    assert schema.features.inputs[0].shape == (-1, args["in_dim"]) and str(schema.targets.inputs[0].type) == "float32"
    source = json.loads(inputs[0].dataset.source)
    rebuilt = describe(catalog.mlp_regression(source["seed"], **source["arguments"]), source["builder"],
                       source["seed"], source["arguments"])
    assert rebuilt[0]["digest"] == inputs[0].dataset.digest


def test_system_metrics_are_sampled_by_a_thread_and_kept_until_shipped():
    from evalkit.controller.job.system_metrics import SystemSampler

    sampler = SystemSampler(0.05).start()
    time.sleep(0.4)
    sampler.stop()
    points = sampler.take()
    cpu = [p for p in points if p.key == "system/cpu_utilization_percentage"]
    assert len(cpu) >= 3 and [p.step for p in cpu] == list(range(len(cpu)))
    assert any(p.key == "system/system_memory_usage_megabytes" and p.value > 0 for p in points)
    assert sampler.take() == []
    sampler.put_back(points[:2])
    assert sampler.take() == points[:2]
    assert SystemSampler(0).start().take() == []       # 0: off


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_progress_is_live_on_a_terminal_plain_elsewhere_and_silent_when_quiet(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setenv(progress.POSITION_ENV, "4/18")
    assert progress.resolve("auto", _Tty()) == "live" and progress.resolve("auto", io.StringIO()) == "plain"
    monkeypatch.setenv("CI", "true")
    assert progress.resolve("auto", _Tty()) == "plain"

    live = _Tty()
    bar = progress.JobProgress("live", "ignite mlp seed=0", 100, 5.0, stream=live)
    bar.started -= 10
    bar.update(None, None)
    bar._last_print = 0
    bar.update(10, 0.5)
    time.sleep(0.01)
    bar._last_print, bar._first = 0, (bar._first[0] - 4, 0)     # 10 steps took 4 s: 90 more take 36 s
    bar.update(10, 0.25)
    bar.end("FINISHED")
    text = live.getvalue()
    assert text.startswith("\r\x1b[K[evalkit] job 4/18: ignite mlp seed=0: starting, 10 s")
    assert "step 10/100 loss 0.25, 10 s, about 36 s left" in text
    assert text.endswith("\r\x1b[K[evalkit] job 4/18: ignite mlp seed=0: FINISHED in 10 s\n")

    plain = io.StringIO()
    lines = progress.JobProgress("plain", "baseline", 100, 1000.0, stream=plain)
    lines.update(1, 0.9)                         # before the interval: nothing printed, the rate's origin set
    lines._last_print -= 1000
    lines.update(2, 0.8)
    lines.end("FAILED (boom)")
    assert plain.getvalue().splitlines() == ["[evalkit] job 4/18: baseline: step 2/100 loss 0.8, 0 s, about 0 s left",
                                             "[evalkit] job 4/18: baseline: FAILED (boom) in 0 s"]
    quiet = io.StringIO()
    silent = progress.JobProgress("quiet", "baseline", 100, 0.0, stream=quiet)
    silent.update(5, 0.1)
    silent.end("FINISHED")
    assert quiet.getvalue() == ""


def test_a_job_in_a_wrappers_environment_reads_as_the_trainer_at_that_environment():
    assert ui.job_description(compose_config("trainer=ignite", "trainer.env=pytorch-ignite-0.4.11"), "running") \
        .startswith("ignite@pytorch-ignite-0.4.11 (aligned) · mlp_regression")
    assert ui.job_description(compose_config("trainer=ignite"), "running").startswith("ignite (aligned) · ")
