"""Synthetic job runs in the stored layout, with planted truths: the fixtures of the analyzer's tests
and of `scripts/bench_verdict.py`.

Seeds act like real ones: a seed fixes a multiplicative effect on the final metric and the
per-step minibatch noise, shared by every arm (same data order and initial weights), while each
run adds its own small idiosyncratic noise. Planted deviations are relative shifts of the final
validation metric, of the loss curve from a given step, of throughput and of peak memory, and runs
that diverge: loss NaN from a given step, validation NaN from there, the run still FINISHED (as a
real diverging loop ends).
"""
from __future__ import annotations

import math
import tempfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from evalkit import names
from evalkit.caliber import caliber_tag

DEFAULT_CALIBER = caliber_tag(hw="cpu", bs=32, accum=1, prec="fp32", ws=1, warmup=5)


@dataclass
class ArmPlan:
    trainer: str
    mode: str = "aligned"
    task: str = "mlp_regression"
    caliber: str = DEFAULT_CALIBER
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    repeats: int = 1
    metric: str = "mse"
    higher_is_better: bool = False
    margin: float = 0.01
    scale: str = "relative"          # the metric's declared scale (tag evalkit.val_metric_scale)
    metric_shift: float = 0.0        # relative shift of the final validation metric
    seed_sd: float = 0.003           # relative spread of the metric over seeds (shared by arms)
    run_sd: float = 0.001            # relative per-run noise on top (repeats, wrapper jitter)
    loss_shift: float = 0.0          # relative shift of the loss curve ...
    loss_shift_from: int = 1         # ... from this optimizer step on
    throughput: float = 1000.0       # samples/s
    throughput_sd: float = 0.02
    memory: float = 2.0e8            # peak bytes
    failed_seeds: tuple[int, ...] = ()
    nonfinite_seeds: tuple[int, ...] = ()   # these seeds' loss goes NaN ...
    nonfinite_from: int = 20                 # ... from this optimizer step on
    failure_reason: str = "RuntimeError: planted failure"
    probes: dict[str, float] = field(default_factory=dict)  # e.g. {"stability": 1.0}


@dataclass
class RunSpec:
    tags: dict[str, str]
    metrics: dict[str, float]
    history: dict[str, tuple[np.ndarray, np.ndarray]]  # metric -> (steps, values)
    steps_csv: str
    val_csv: str
    status: str


def _seed_rng(seed: int, salt: int) -> np.random.Generator:
    return np.random.default_rng([seed, salt])


def lr_schedule(steps: np.ndarray, peak: float = 1e-3, warmup: int = 5) -> np.ndarray:
    total = steps[-1] if steps.size else 1
    warm = np.minimum(steps / warmup, 1.0)
    cosine = 0.5 * (1 + np.cos(np.pi * np.clip((steps - warmup) / max(total - warmup, 1), 0, 1)))
    return peak * np.where(steps <= warmup, warm, cosine)


def loss_curve(plan: ArmPlan, seed: int, steps: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    shared = _seed_rng(seed, 1)
    start = 1.0 + 0.05 * shared.standard_normal()
    minibatch = 0.05 * shared.standard_normal(steps.size)            # same data order in every arm
    loss = start * (0.1 + 0.9 * np.exp(-steps / (steps.size / 4 + 1))) * (1 + minibatch)
    loss *= 1 + plan.run_sd * rng.standard_normal(steps.size)
    return loss * np.where(steps >= plan.loss_shift_from, 1 + plan.loss_shift, 1.0)


def run_spec(plan: ArmPlan, seed: int, repeat: int, n_steps: int, val_every: int, sweep_id: str) -> RunSpec:
    rng = np.random.default_rng([seed, repeat, zlib.crc32(f"{plan.trainer}/{plan.mode}/{plan.task}".encode())])
    steps = np.arange(1, n_steps + 1)
    loss = loss_curve(plan, seed, steps, rng)
    lr = lr_schedule(steps)
    step_time = 0.01 * (1 + 0.05 * rng.standard_normal(n_steps)).clip(0.5)
    seed_effect = plan.seed_sd * _seed_rng(seed, 2).standard_normal()
    final = 0.05 * math.exp(seed_effect + plan.run_sd * rng.standard_normal()) * (1 + plan.metric_shift)
    val_steps = np.unique(np.r_[np.arange(val_every, n_steps + 1, val_every), n_steps])
    val_metric = final * (1 + 2.0 * (n_steps - val_steps) / n_steps)
    failed = seed in plan.failed_seeds
    if failed:  # a failed run stops half way and never validates at the end
        keep = steps <= n_steps // 2
        steps, loss, lr, step_time = steps[keep], loss[keep], lr[keep], step_time[keep]
        val_steps, val_metric = val_steps[val_steps <= n_steps // 2], val_metric[val_steps <= n_steps // 2]
    if seed in plan.nonfinite_seeds:
        loss = np.where(steps >= plan.nonfinite_from, np.nan, loss)
        val_metric = np.where(val_steps >= plan.nonfinite_from, np.nan, val_metric)
    grad_norm = 1.0 / np.sqrt(steps)
    throughput = plan.throughput * math.exp(plan.throughput_sd * rng.standard_normal())
    tags = _tags(plan, seed, repeat, sweep_id, failed)
    metrics = {names.PERF_SAMPLES_PER_S: throughput, names.PERF_STEPS_PER_S: throughput / 32,
               names.PERF_STEP_TIME_MEDIAN: float(np.median(step_time)), names.PERF_PEAK_MEM: plan.memory,
               names.perf_peak_mem_rank(0): plan.memory}
    metrics.update({names.probe_pass(dim): v for dim, v in plan.probes.items()})
    history = {names.TRAIN_LOSS: (steps, loss), names.TRAIN_LR: (steps, lr), names.TRAIN_GRAD_NORM: (steps, grad_norm),
               names.TRAIN_STEP_TIME: (steps, step_time), names.val_metric(plan.metric): (val_steps, val_metric),
               names.VAL_LOSS: (val_steps, val_metric)}
    if failed:
        metrics = {}
    return RunSpec(tags, metrics, history,
                   _csv(["step", "loss", "lr", "grad_norm", "step_time_s"], [steps, loss, lr, grad_norm, step_time],
                        extra="loss_scale,validated_before", cells=lambda i: f",{steps[i] % val_every == 1}"),
                   _csv(["step", "loss", plan.metric], [val_steps, val_metric, val_metric]),
                   "FAILED" if failed else "FINISHED")


def _tags(plan: ArmPlan, seed: int, repeat: int, sweep_id: str, failed: bool) -> dict[str, str]:
    tags = {names.ROLE: names.ROLE_JOB, names.TRAINER: plan.trainer, names.MODE: plan.mode, names.TASK: plan.task,
            names.SEED: str(seed), names.REPEAT: str(repeat), names.CALIBER: plan.caliber, names.PRECISION: "fp32",
            names.WORLD_SIZE: "1", names.HARDWARE: "cpu", names.SWEEP_ID: sweep_id, names.VAL_METRIC: plan.metric,
            names.VAL_METRIC_HIGHER_IS_BETTER: str(plan.higher_is_better).lower(),
            names.VAL_METRIC_MARGIN: str(plan.margin), names.VAL_METRIC_SCALE: plan.scale}
    if failed:
        tags[names.FAILURE_REASON] = plan.failure_reason
    return tags


def _csv(header: list[str], columns: list[np.ndarray], extra: str = "", cells=None) -> str:
    """CSV text; `extra` header names and `cells(row)` mimic the training core's blank and boolean
    columns, which the analyzer must read past."""
    table = np.column_stack(columns) if columns[0].size else np.empty((0, len(header)))
    head = ",".join(header) + ("," + extra if extra else "")
    rows = [",".join(f"{v:.7g}" for v in row) + ("," + cells(i) if cells else "") for i, row in enumerate(table)]
    return "\n".join([head] + rows) + "\n"


def plan_specs(plans: list[ArmPlan], n_steps: int = 50, val_every: int = 10, sweep_id: str = "synthetic"):
    """Every run of every planned arm, seeds and repeats."""
    for plan in plans:
        for seed in plan.seeds:
            for repeat in range(plan.repeats):
                yield run_spec(plan, seed, repeat, n_steps, val_every, sweep_id)


def write_run(client, experiment_id: str, spec: RunSpec, full_history: bool = True,
              parent_run_id: str | None = None) -> str:
    """Log one spec as an MLflow run: tags, summaries, metric history (or last points), CSV records."""
    from mlflow.entities import Metric

    tags = dict(spec.tags)
    if parent_run_id:
        tags[names.MLFLOW_PARENT_RUN] = parent_run_id
    run_id = client.create_run(experiment_id, tags=tags).info.run_id
    points = [Metric(k, v, 0, 0) for k, v in spec.metrics.items()]
    for key, (steps, values) in spec.history.items():
        idx = range(len(steps)) if full_history else range(max(len(steps) - 1, 0), len(steps))
        points += [Metric(key, float(values[i]), 0, int(steps[i])) for i in idx]
    for start in range(0, len(points), 1000):  # MLflow accepts 1000 metrics per batch
        client.log_batch(run_id, metrics=points[start:start + 1000])
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / names.STEPS_CSV_NAME).write_text(spec.steps_csv)
        (Path(tmp) / names.VAL_CSV_NAME).write_text(spec.val_csv)
        client.log_artifacts(run_id, tmp, artifact_path=names.RECORDS_DIR)
    client.set_terminated(run_id, spec.status)
    return run_id


def to_record(spec: RunSpec, run_id: str):
    """The RunRecord the store would read back for `spec` (pure: no MLflow involved)."""
    from evalkit.analysis.records import RunRecord, parse_csv
    from evalkit.analysis.store import STEP_COLUMNS

    metrics = dict(spec.metrics)
    metrics.update({k: float(v[-1]) for k, (_, v) in spec.history.items() if len(v)})
    return RunRecord(run_id, spec.status, dict(spec.tags), metrics,
                     steps=parse_csv(spec.steps_csv, STEP_COLUMNS), val=parse_csv(spec.val_csv))


def records(plans: list[ArmPlan], n_steps: int = 50, val_every: int = 10):
    """In-memory records of every planned run, as `store.read_runs` would return them."""
    return [to_record(spec, f"run{i:05d}") for i, spec in enumerate(plan_specs(plans, n_steps, val_every))]


def build_store(folder: Path, plans: list[ArmPlan], experiment: str = "evalkit", n_steps: int = 50,
                val_every: int = 10, sweep_id: str = "synthetic", full_history: bool = True,
                uri: str | None = None) -> tuple[str, str]:
    """A SQLite MLflow store under `folder` (or the store at `uri`, a tracking server: its own artifact
    location) holding a sweep parent run and every planned job run as its child; returns (tracking URI, parent
    run id)."""
    from mlflow.tracking import MlflowClient

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    local = uri is None
    uri = uri or f"sqlite:///{folder / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    exp_id = exp.experiment_id if exp else client.create_experiment(
        experiment, artifact_location=(folder / "artifacts").as_uri() if local else None)
    parent = client.create_run(exp_id, tags={names.ROLE: names.ROLE_SWEEP, names.SWEEP_ID: sweep_id}).info.run_id
    for spec in plan_specs(plans, n_steps, val_every, sweep_id):
        write_run(client, exp_id, spec, full_history, parent_run_id=parent)
    client.set_terminated(parent, "FINISHED")
    return uri, parent
