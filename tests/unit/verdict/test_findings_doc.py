"""docs/results/<versions>.md has one source: a snapshot of a stored evaluation beside it. The snapshot keeps the
newest finished probe run per probe, trainer and mode and the newest verdict's cells; the document is rendered from it
alone, named by the versions it measured, and each committed document must be the rendering of its committed
snapshot (tests/unit/scripts/test_docs.py checks every generated document the same way)."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from evalkit import names
from evalkit.probes.catalog import dimension_names
from evalkit.probes.findings import Finding, ProbeResult
from evalkit.verdict.findings_doc import SCHEMA, render, results_name, take_snapshot, verdict_excerpt

ORDER = Finding("order.shuffled", "data order differs from evalkit's", "ws1-noclip", 1,
                explained_by=["torch DistributedSampler(shuffle=True, seed=42)"], knob="TrainingArguments(seed=...)")


def log_run(client, exp_id, tags: dict, files: dict[str, str], folder: str, status: str = "FINISHED") -> str:
    run_id = client.create_run(exp_id, tags=tags).info.run_id
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in files.items():
            (Path(tmp) / name).write_text(text)
            client.log_artifact(run_id, str(Path(tmp) / name), folder)
    client.set_terminated(run_id, status)
    return run_id


def probe_tags(probe: str, trainer: str, mode: str, version: str) -> dict:
    return {names.ROLE: names.ROLE_PROBE, names.PROBE: probe, names.TRAINER: trainer, names.MODE: mode,
            names.WRAPPER_VERSION: version, names.TORCH_VERSION: "2.13.0+cpu",
            "mlflow.source.git.commit": "0123456789abcdef"}


@pytest.fixture
def store(tmp_path):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    exp_id = client.create_experiment("evalkit", artifact_location=(tmp_path / "artifacts").as_uri())
    old = ProbeResult("semantics", True, figures={"findings": 0.0})
    new = ProbeResult("semantics", False, [ORDER], figures={"findings": 1.0})
    log_run(client, exp_id, probe_tags("semantics", "hf_trainer", "defaults", "5.23.0"),
            {"semantics.json": old.to_json()}, "probe")
    log_run(client, exp_id, probe_tags("semantics", "hf_trainer", "defaults", "5.24.0"),
            {"semantics.json": new.to_json()}, "probe")
    log_run(client, exp_id, probe_tags("semantics", "hf_trainer", "aligned", "5.24.0"),
            {"semantics.json": old.to_json()}, "probe")
    crashed = ProbeResult("stability", True, headline="9/9 items")
    log_run(client, exp_id, probe_tags("stability", "hf_trainer", "aligned", "5.24.0"),   # a crash: not shown
            {"stability.json": crashed.to_json()}, "probe", status="FAILED")
    leak = ProbeResult("stability", False, headline="8/9 items: long run",
                       figures={"leak_kib_per_1k_steps": 815.2, "leak_low": 748.0, "leak_high": 882.4,
                                "baseline_leak_kib_per_1k_steps": 176.0, "baseline_leak_low": 173.1,
                                "baseline_leak_high": 178.4})
    log_run(client, exp_id, probe_tags("stability", "hf_trainer", "aligned", "5.24.0"),
            {"stability.json": leak.to_json()}, "probe")
    timed = ProbeResult("performance", True, headline="step 1.02x")      # its first job is the baseline's
    log_run(client, exp_id, probe_tags("performance", "hf_trainer", "aligned", "2.13.0+cpu"),
            {"performance.json": timed.to_json()}, "probe")
    log_run(client, exp_id, {names.ROLE: names.ROLE_JOB, names.TRAINER: "hf_trainer",
                             names.WRAPPER_VERSION: "5.24.0"}, {}, "records")
    dims = {d: {"status": "not run", "figure": "", "reasons": []} for d in dimension_names()}
    dims["semantics"] = {"status": "fail", "figure": "1 finding: data order differs", "reasons": []}
    row = {"arm": {"trainer": "hf_trainer", "mode": "defaults", "task": "mlp_regression", "caliber": "hw=cpu|bs=32"},
           "dimensions": dims}
    log_run(client, exp_id, {names.ROLE: names.ROLE_VERDICT}, {"verdict.json": json.dumps({"rows": [row]})},
            "verdict")
    return client


def test_the_snapshot_keeps_the_newest_finished_run_of_each_probe_and_the_verdicts_cells(store):
    snap = take_snapshot(store, taken="2026-12-03")
    assert snap["schema"] == SCHEMA and snap["evalkit_commit"] == "0123456789"
    kept = {(p["probe"], p["mode"]): p for p in snap["probes"]}
    assert set(kept) == {("semantics", "defaults"), ("semantics", "aligned"), ("stability", "aligned"),
                         ("performance", "aligned")}
    assert {p["version"] for p in snap["probes"]} == {"5.24.0"}        # the wrapper's jobs', not a control arm's
    assert kept["semantics", "defaults"]["findings"][0]["code"] == "order.shuffled"
    assert kept["stability", "aligned"]["headline"] == "8/9 items: long run"      # not the crashed run's
    assert snap["verdict"][0]["cells"]["semantics"] == "fail (1 finding: data order differs)"


def test_the_document_says_where_it_comes_from_and_shows_what_the_snapshot_holds(store):
    text = render(take_snapshot(store, taken="2026-12-03"))
    assert "Taken 2026-12-03 at evalkit 0123456789, torch 2.13.0+cpu, hf_trainer 5.24.0." in text
    assert "| hf_trainer | defaults | not run | fail (1 finding: data order differs) |" in text
    assert ("| hf_trainer (5.24.0) | `order.shuffled` data order differs from evalkit's | torch DistributedSampler"
            "(shuffle=True, seed=42) | 1 (ws1-noclip) | TrainingArguments(seed=...) (verified: aligned mode shows "
            "none) |") in text
    assert "| hf_trainer | aligned | 815 [748, 882] | 176 [173, 178] |" in text
    assert "| trainer | mode | semantics | performance | stability |" in text          # in the order a team asks
    assert "| hf_trainer | aligned | pass | pass: step 1.02x | fail: 8/9 items: long run |" in text


def test_an_empty_store_or_a_foreign_file_is_refused_with_its_reason(tmp_path):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    with pytest.raises(ValueError, match="no experiment 'evalkit'.*run `evalkit-eval` first"):
        take_snapshot(client)
    client.create_experiment("evalkit", artifact_location=(tmp_path / "artifacts").as_uri())
    with pytest.raises(ValueError, match="no finished probe run and no verdict"):
        take_snapshot(client)
    with pytest.raises(ValueError, match="not a findings snapshot"):
        render({"schema": "evalkit.verdict/2"})


def test_a_document_is_named_by_the_versions_it_measured(store):
    snap = take_snapshot(store, taken="2026-12-03")
    assert results_name(snap) == "torch-2.13.0+cpu_hf_trainer-5.24.0"
    newer = json.loads(json.dumps(snap))
    for p in newer["probes"]:
        p["version"] = "5.25.0"
    assert results_name(newer) == "torch-2.13.0+cpu_hf_trainer-5.25.0"      # another version: a document of its own
    assert "from torch-2.13.0+cpu_hf_trainer-5.24.0.json beside it" in render(snap)
    with pytest.raises(ValueError, match="names no version"):
        results_name({"probes": []})


def test_the_readme_excerpt_shows_each_cell_of_the_snapshot_and_links_the_document(store):
    snap = take_snapshot(store, taken="2026-12-03")
    text = verdict_excerpt(snap, "docs/results/x.md")
    assert "The quick evaluation of 2026-12-03 (task mlp_regression, caliber `hw=cpu|bs=32`)" in text
    assert "| hf_trainer | fail (1 finding: data order differs) | - |" in text     # no aligned row: a dash
    assert text.endswith("[docs/results/x.md](docs/results/x.md).")
    aligned = json.loads(json.dumps(snap))
    aligned["verdict"].append({**aligned["verdict"][0], "mode": "aligned",
                               "cells": {d: "pass (0 findings)" for d in dimension_names()}})
    assert "| hf_trainer | " + " | ".join(["pass"] * len(dimension_names())) + " |" in verdict_excerpt(aligned, "d.md")
    with pytest.raises(ValueError, match="no verdict"):
        verdict_excerpt({**snap, "verdict": []}, "d.md")
