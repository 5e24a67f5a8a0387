"""Reading runs back from a small real MLflow SQLite store (the layout written by the training core)."""
import os

import numpy as np
import pytest

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

from evalkit.analysis import store  # noqa: E402
from evalkit.analysis.synthetic import ArmPlan, build_store  # noqa: E402


@pytest.fixture(scope="module")
def fixture_store(tmp_path_factory):
    folder = tmp_path_factory.mktemp("store")
    plans = [ArmPlan("baseline", seeds=(0, 1, 2)), ArmPlan("lightning", seeds=(0, 1, 2), failed_seeds=(2,))]
    uri, parent = build_store(folder, plans, n_steps=30)
    other_uri, _ = build_store(folder, [ArmPlan("baseline", seeds=(7,))], sweep_id="other", n_steps=30)
    assert other_uri == uri
    client = store.connect(uri)
    exp_id = store.experiment_id(client, "evalkit")
    client.create_run(exp_id, tags={"evalkit.role": "verdict"})  # must never be read as a job
    return uri, parent, client, exp_id


def test_paged_search_returns_every_job_run_and_nothing_else(fixture_store):
    _, _, client, exp_id = fixture_store
    records = store.search_records(client, exp_id, page_size=2)
    assert len(records) == 7 and {r.role for r in records} == {"job"}
    assert len({r.run_id for r in records}) == 7


def test_filters_by_sweep_id_and_by_parent_run(fixture_store):
    _, parent, client, exp_id = fixture_store
    assert len(store.search_records(client, exp_id, sweep_id="other")) == 1
    children = store.search_records(client, exp_id, parent_run_id=parent)
    assert len(children) == 6 and all(r.tags["evalkit.sweep_id"] == "synthetic" for r in children)


def test_curves_come_from_the_csv_records_in_place_and_by_download(fixture_store):
    _, _, client, exp_id = fixture_store
    records = store.search_records(client, exp_id, sweep_id="synthetic")
    store.load_curves(client, records[:3])
    for r in records[3:]:
        r.artifact_uri = "mlflow-artifacts:/not/local"  # forces the download path
    store.load_curves(client, records[3:], workers=2)
    for r in records:
        n = 15 if r.status == "FAILED" else 30
        assert r.steps["step"].tolist() == list(range(1, n + 1)), r.run_id
        assert set(r.steps) >= {"loss", "lr", "grad_norm", "step_time_s"}
        assert r.val["step"][-1] <= n and "mse" in r.val
    finished = [r for r in records if r.finished]
    assert all(np.isclose(r.val["mse"][-1], r.metrics["val/mse"]) for r in finished)
    failed = next(r for r in records if not r.finished)
    assert failed.failure_reason.startswith("RuntimeError") and failed.broken


def test_read_runs_bad_inputs_raise_store_errors(fixture_store, tmp_path):
    uri = fixture_store[0]
    with pytest.raises(store.StoreError, match="^no MLflow store at .*missing.db"):
        store.read_runs(f"sqlite:///{tmp_path / 'missing.db'}", "evalkit")
    assert not (tmp_path / "missing.db").exists()
    with pytest.raises(store.StoreError, match="^unknown experiment 'nope' at sqlite:///"):
        store.read_runs(uri, "nope")
    with pytest.raises(store.StoreError, match="^no evalkit job or probe runs in experiment 'evalkit'.*absent"):
        store.read_runs(uri, "evalkit", sweep_id="absent")
    with pytest.raises(store.StoreError, match=r"^tracking URI unreachable \(http://127.0.0.1:9\)"):
        store.read_runs("http://127.0.0.1:9", "evalkit")
