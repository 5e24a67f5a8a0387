"""The parameter records with the model's buffers (issue 44): a BatchNorm model's running statistics recorded after
every step and at a resumed job's start (before its first forward updates them), through the CSV the controller
writes and back into the evidence a judge reads; a model without buffers records none."""
from __future__ import annotations

import json

import numpy as np
import torch

from evalkit import names
from evalkit.controller.job.shipper import Shipper
from evalkit.observe.observer import Observer, ObserveSettings
from evalkit.probes.evidence import parse_params
from evalkit.spool import SpoolWriter
from evalkit.tasks.catalog import mlp_regression


def _task(batchnorm: bool):
    return mlp_regression(0, n_train=64, n_val=16, in_dim=4, hidden=8, depth=1, out_dim=1, noise=0.1,
                          batchnorm=batchnorm)


def _buffers(model) -> list[float]:
    return torch.cat([b.float().reshape(-1) for b in model.buffers()]).tolist()


def _train(tmp_path, task, steps: int, resuming: bool = False) -> tuple[list[dict], list[list[float]]]:
    """`steps` SGD steps observed with record_params; the params records and the buffers after each step."""
    observer = Observer(task, SpoolWriter(str(tmp_path), 0), torch.device("cpu"), ObserveSettings(warmup_steps=0,
                        record_params=True, resuming=resuming)).attach()
    opt = torch.optim.SGD(task.model.parameters(), lr=0.1)
    x, y = task.train_set.tensors
    after = []
    for step in range(steps):
        task.loss_fn(task.model(x[8 * step:8 * step + 8]), y[8 * step:8 * step + 8]).backward()
        opt.step()
        opt.zero_grad()
        after.append(_buffers(task.model) if list(task.model.buffers()) else [])
    observer.finish()
    observer.detach()
    lines = (tmp_path / "records_rank0.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["kind"] == "params"], after


def _csv(tmp_path, records: list[dict]) -> str:
    shipper = Shipper(None, "run", str(tmp_path), 1)
    for record in records:
        shipper._take(0, record)
    shipper.write_csvs(str(tmp_path / "out"), "mse")
    return (tmp_path / "out" / names.PARAMS_CSV_NAME).read_text()


def test_a_batchnorm_models_buffers_are_recorded_after_every_step_and_read_back(tmp_path):
    task = _task(batchnorm=True)
    records, after = _train(tmp_path, task, 3)
    assert [r["step"] for r in records] == [1, 2, 3]
    assert [r["buffers"] for r in records] == after
    assert after[0] != after[1] and len(after[0]) == 8 + 8 + 1   # running mean, var, batches tracked
    read = parse_params(_csv(tmp_path, records), "buffers")
    assert sorted(read) == [1, 2, 3] and np.allclose(read[3], after[2], rtol=1e-7)
    assert len(parse_params(_csv(tmp_path, records))[3]) == len(records[2]["values"])


def test_a_resumed_job_records_the_buffers_it_started_from(tmp_path):
    task = _task(batchnorm=True)
    with torch.no_grad():
        for b in task.model.buffers():
            b.fill_(2)                                       # as a checkpoint loaded before the first forward
    restored = _buffers(task.model)
    records, after = _train(tmp_path, task, 2, resuming=True)
    start, *steps = records
    assert start["buffers"] == restored and [r["buffers"] for r in steps] == after
    assert start["step"] == steps[0]["step"] - 1


def test_a_model_without_buffers_records_none(tmp_path):
    records, _ = _train(tmp_path, _task(batchnorm=False), 2)
    assert all("buffers" not in r for r in records)
    text = _csv(tmp_path, records)
    assert text.splitlines()[0] == "step,values" and parse_params(text, "buffers") == {}
