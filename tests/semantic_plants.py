"""Plants in memory on recorded semantic evidence (the judge's unit tests): the LR, ids or records of a recorded job
changed, and its parameters re-simulated with the float64 oracle from the planted rule (rounded to float32 as
recorded), so that exactly one semantics differs."""
from __future__ import annotations

import numpy as np

from evalkit.probes import evidence
from evalkit.probes.semantics.explain_update import Model, predict
from evalkit.probes.semantics.oracle import Caliber, GradientOracle, ObservedStep, observed_micro_ids


def replant_updates(job: evidence.JobEvidence, rule=None) -> None:
    """Rewrite the parameters as if each step had applied `rule(step) -> Δ` (default: the expected update on a task
    of a fixed number of loss terms per sample; on a token task the step carries each micro-batch's tokens,
    `counts`)."""
    cal = Caliber.of(job.config)
    rule = rule or (lambda s: predict(s, Model(norm=cal.grad_clip), cal.grad_accum))
    oracle, rows = GradientOracle(job.config), {r["step"]: r for r in job.steps}
    theta = oracle.theta0
    for k in sorted(job.params):
        ids = observed_micro_ids(job, k)
        grads = {r: [oracle.micro_grad(theta, b) for b in micro] for r, micro in ids.items()}
        counts = {r: [oracle.terms(b) for b in micro] for r, micro in ids.items()} \
            if oracle.loss_terms is not None else None
        step = ObservedStep(k, float(rows[k]["lr"]), theta, theta, grads, rows[k].get("loss_scale"), rows[k], counts)
        theta = (theta + rule(step)).astype(np.float32).astype(np.float64)
        job.params[k] = theta


def set_stream(job: evidence.JobEvidence, groups: dict[int, dict[int, list[list[int]]]]) -> None:
    """Replace the micro-batch records with `groups` (step -> rank -> micro-batches' ids)."""
    for rank in job.micro:
        job.micro[rank] = [{"step": k, "i": i, "n": len(ids), "train_mode": True, "grad": True, "dtype": "float32",
                            "loss": None, "ids": ids} for k in sorted(groups) for i, ids in enumerate(groups[k][rank])]
    for row in job.steps:
        row["micro_batches"] = row["loss_calls"] = len(groups[row["step"]][0])


def codes(result) -> list[str]:
    return [f.code for f in result.findings]


def only(result, code: str):
    assert codes(result) == [code], [f.line() for f in result.findings]
    return result.findings[0]


def regroup(job: evidence.JobEvidence, sizes: list[int]) -> None:
    """Rank 0's micro-batches, in their order, cut into steps of `sizes` micro-batches (one per recorded step)."""
    stream = [m["ids"] for m in sorted(job.micro[0], key=lambda m: (m["step"], m["i"]))]
    groups, at = {}, 0
    for k, size in enumerate(sizes[:len(job.steps)], 1):
        groups[k] = {0: stream[at:at + size]}
        at += size
    set_stream(job, groups)


def record_in_process(adapter, name: str, config, folder) -> evidence.JobEvidence:
    """A probe job's evidence as the judge reads it, recorded in this process (no worker, no tracking store):
    `adapter` trained on job `name`'s resolved `config` (a DictConfig: `probes.runner.probe_job_config`'s) with
    evalkit's observers attached, its spool read and written as the records CSVs by the controller's shipper (nothing
    sent), then parsed as `probes.evidence.load_job` parses them. A job of the truth caliber trains in well under a
    second."""
    import json
    import os

    import torch
    from hydra.utils import get_method
    from omegaconf import OmegaConf

    from evalkit import names
    from evalkit.controller.job.shipper import Shipper
    from evalkit.observe.observer import Observer, ObserveSettings
    from evalkit.spool import SpoolWriter
    from evalkit.tasks.schemas import builder_arguments
    from evalkit.worker.run import make_job

    folder, cpu = str(folder), torch.device("cpu")
    task = get_method(config.task._target_)(int(config.seed), **builder_arguments(config.task))
    observer = Observer(task, SpoolWriter(os.path.join(folder, "spool"), 0), cpu, ObserveSettings(warmup_steps=0,
                        record_params=True, deferred=False)).attach()
    try:
        adapter.fit(make_job(config, task, cpu, {"ckpt_dir": os.path.join(folder, "ckpt")}))
        summary = observer.finish()
    finally:
        observer.detach()
    shipper = Shipper(None, None, os.path.join(folder, "spool"), 1)
    shipper.poll(final=True)
    records = os.path.join(folder, "records")
    shipper.write_csvs(records, task.metric.name)

    def text(name: str) -> str:
        path = os.path.join(records, name)
        return open(path).read() if os.path.exists(path) else ""

    job = evidence.JobEvidence(name, "in-process", "FINISHED", OmegaConf.to_container(config, resolve=True))
    job.steps, job.val = evidence.parse_rows(text(names.STEPS_CSV_NAME)), evidence.parse_rows(text(names.VAL_CSV_NAME))
    job.micro = {0: evidence.parse_micro(text(names.micro_csv_name(0)))}
    job.params = evidence.parse_params(text(names.PARAMS_CSV_NAME)) if text(names.PARAMS_CSV_NAME) else {}
    job.optimizer = json.loads(text(names.OPTIMIZER_JSON_NAME) or "[]")
    job.effective, job.summary = adapter.effective_config().as_json(), summary
    return job
