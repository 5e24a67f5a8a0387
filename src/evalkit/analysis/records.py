"""The analyzer's view of one stored training job: tags, final metrics and its step/val curves.

This is the read side of the contract with the training core: tag names, metric names and the CSV
artifacts it writes. Nothing here talks to MLflow; `store.py` fills these records.
"""
from __future__ import annotations

import io
from dataclasses import dataclass, field

import numpy as np

from evalkit import names

FINISHED, FAILED, KILLED = "FINISHED", "FAILED", "KILLED"
BROKEN_STATUSES = (FAILED, KILLED)

Curves = dict[str, np.ndarray]  # CSV column name -> values, all of one length


@dataclass
class RunRecord:
    """One MLflow run as the analyzer needs it; `steps`/`val` hold the CSV records once loaded, and a probe
    run's `probe_results` its parsed `probe/<dimension>.json` artifacts (plain dicts, keyed by dimension)."""

    run_id: str
    status: str
    tags: dict[str, str]
    metrics: dict[str, float]
    artifact_uri: str = ""
    steps: Curves = field(default_factory=dict)
    val: Curves = field(default_factory=dict)
    probe_results: dict[str, dict] = field(default_factory=dict)

    def tag(self, name: str, default: str = "") -> str:
        """A tag by its full name (`evalkit.names`)."""
        return self.tags.get(name, default)

    @property
    def role(self) -> str:
        return self.tag(names.ROLE)

    @property
    def probe(self) -> str:
        """The probe's name on a probe run (e.g. `semantics`), empty on any other run."""
        return self.tag(names.PROBE)

    @property
    def trainer(self) -> str:
        """The arm's wrapper: `trainer.name`, or `name@env` for a run in a wrapper's own environment (`trainer.env`:
        another version of it), so that two versions of one wrapper are two arms."""
        env = self.tag(names.TRAINER_ENV)
        return f"{self.tag(names.TRAINER, '?')}{names.ENV_SEPARATOR}{env}" if env else self.tag(names.TRAINER, "?")

    @property
    def mode(self) -> str:
        return self.tag(names.MODE, "aligned")

    @property
    def task(self) -> str:
        return self.tag(names.TASK, "?")

    @property
    def caliber(self) -> str:
        return self.tag(names.CALIBER, "?")

    @property
    def seed(self) -> int | None:
        return _int_or_none(self.tag(names.SEED))

    @property
    def repeat(self) -> int:
        return _int_or_none(self.tag(names.REPEAT)) or 0

    @property
    def finished(self) -> bool:
        return self.status == FINISHED

    @property
    def broken(self) -> bool:
        """Failed or killed: the functional dimension counts it against the wrapper."""
        return self.status in BROKEN_STATUSES

    @property
    def failure_reason(self) -> str:
        return self.tag(names.FAILURE_REASON) or f"run ended {self.status}"

    @property
    def val_metric(self) -> str:
        return self.tag(names.VAL_METRIC, "loss")

    @property
    def higher_is_better(self) -> bool:
        return self.tag(names.VAL_METRIC_HIGHER_IS_BETTER, "false").lower() == "true"

    @property
    def margin(self) -> float | None:
        return _float_or_none(self.tag(names.VAL_METRIC_MARGIN))

    @property
    def metric_scale(self) -> str:
        """The scale the task declared for its metric (tag `evalkit.val_metric_scale`)."""
        return metric_scale(self.val_metric, self.tag(names.VAL_METRIC_SCALE))


def trainer_overrides(arm_trainer: str) -> str:
    """The command-line overrides that run an arm's wrapper (`RunRecord.trainer`): `trainer=hf_trainer`, and
    `trainer.env=<env>` for one in its own environment (`hf_trainer@<env>`)."""
    name, _, env = arm_trainer.partition(names.ENV_SEPARATOR)
    return f"trainer={name} trainer.env={env}" if env else f"trainer={name}"


def probe_runs(records: list[RunRecord], dimension: str) -> list[RunRecord]:
    """Each probe run that judged `dimension` (a parsed result or its pass metric), once, by trainer, mode and id:
    a probe run joins several arms, so it appears several times among the arms' runs."""
    unique = {r.run_id: r for r in records if r.role == names.ROLE_PROBE
              and (dimension in r.probe_results or names.probe_pass(dimension) in r.metrics)}
    return sorted(unique.values(), key=lambda r: (r.trainer, r.mode, r.run_id))


# Runs logged before the tag existed: the built-in tasks' declarations (accuracy can be 0).
SCALE_BEFORE_TAGS = {"accuracy": "absolute"}


def metric_scale(metric: str, tagged: str) -> str:
    """The tagged scale when there is one, else what the built-in task declared, else relative."""
    tagged = (tagged or "").strip().lower()
    if tagged in ("relative", "absolute"):
        return tagged
    return SCALE_BEFORE_TAGS.get(metric, "relative")


def _int_or_none(text: str) -> int | None:
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def _float_or_none(text: str) -> float | None:
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def parse_csv(text: str, wanted: tuple[str, ...] | None = None) -> Curves:
    """Columns of a records CSV with a header row: the `wanted` ones that exist, or all.

    The fast path is numpy's C reader on the chosen columns only, so text or empty cells in other
    columns (the training core writes booleans and blanks) cost nothing. A chosen column with
    text or blanks falls back to a slower reader and reads as NaN there.
    """
    header, _, body = text.strip().partition("\n")
    if not header:
        return {}
    names = [name.strip() for name in header.split(",")]
    index = [i for i, name in enumerate(names) if wanted is None or name in wanted]
    if not body.strip():
        return {names[i]: np.empty(0) for i in index}
    try:
        table = np.loadtxt(io.StringIO(body), delimiter=",", ndmin=2, usecols=index)
    except ValueError:
        table = np.genfromtxt(io.StringIO(body), delimiter=",", usecols=index, ndmin=2)
    return {names[i]: table[:, j] for j, i in enumerate(index)}
