"""A probe job's stored records, read back from the tracking store: the only input a judge gets.

Everything here comes from the child run's artifacts and tags (`records/*.csv`, `records/*.json`,
`config/resolved.yaml`, `evalkit/effective_config.json`, `evalkit/summary_rank0.json`, `evalkit/call_profile.json`),
never from the worker's memory: a judge sees what a user of the store could see. `to_json`/`from_json` keep a job's
evidence as a test fixture.
"""
from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from evalkit import names


@dataclass
class JobEvidence:
    name: str                                   # the plan's name of the job ("ws1-noclip")
    run_id: str
    status: str                                 # FINISHED | FAILED | KILLED
    config: dict[str, Any]                      # the job's resolved config
    tags: dict[str, str] = field(default_factory=dict)
    steps: list[dict[str, Any]] = field(default_factory=list)        # rank 0, one per optimizer step
    micro: dict[int, list[dict[str, Any]]] = field(default_factory=dict)   # rank -> micro-batches (ids: list)
    params: dict[int, np.ndarray] = field(default_factory=dict)      # step -> parameters after it (rank 0)
    buffers: dict[int, np.ndarray] = field(default_factory=dict)     # step -> buffers after it (BatchNorm statistics)
    val: list[dict[str, Any]] = field(default_factory=list)          # one per validation run
    effective: dict[str, Any] = field(default_factory=dict)          # the adapter's effective config
    summary: dict[str, Any] = field(default_factory=dict)            # rank 0's summary
    memory: list[dict[str, Any]] = field(default_factory=list)       # observe.memory_every samples (rank 0)
    values: list[dict[str, Any]] = field(default_factory=list)       # TrainJob.log_value calls (rank 0)
    optimizer: list[dict[str, Any]] = field(default_factory=list)    # the optimizer stepped, per change (rank 0)
    profile: dict[str, Any] = field(default_factory=dict)            # observe.call_profile's functions, memory

    @property
    def failure_reason(self) -> str:
        return self.tags.get(names.FAILURE_REASON, "")

    @property
    def world_size(self) -> int:
        return int(self.config.get("distributed", {}).get("world_size", 1))

    def to_json(self) -> str:
        data = asdict(self)
        for key in ("params", "buffers"):
            data[key] = {str(k): v.tolist() for k, v in getattr(self, key).items()}
        data["micro"] = {str(k): v for k, v in self.micro.items()}
        return json.dumps(data, default=str)

    @classmethod
    def from_json(cls, text: str) -> "JobEvidence":
        data = json.loads(text)
        for key in ("params", "buffers"):    # a recording older than the buffers has none
            data[key] = {int(k): np.asarray(v, dtype=np.float64) for k, v in data.get(key, {}).items()}
        data["micro"] = {int(k): v for k, v in data["micro"].items()}
        return cls(**data)


# ------------------------------------------------------------------ parsing the CSV records
def _value(text: str) -> Any:
    if text == "":
        return None
    if text in ("True", "False"):
        return text == "True"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def parse_rows(text: str) -> list[dict[str, Any]]:
    return [{k: _value(v) for k, v in row.items()} for row in csv.DictReader(io.StringIO(text))]


def parse_micro(text: str) -> list[dict[str, Any]]:
    rows = []
    for row in csv.DictReader(io.StringIO(text)):
        ids = row.pop("ids", "") or ""
        rows.append({**{k: _value(v) for k, v in row.items()}, "ids": [int(i) for i in ids.split()]})
    return rows


PARAMS_FIELD_LIMIT = 2**31 - 1   # characters in one field: a row holds every parameter (csv's default: 131,072)


def parse_params(text: str, column: str = "values") -> dict[int, np.ndarray]:
    """step -> the parameters (`values`) or the buffers (`buffers`: only the steps and files that hold them). A row
    holds a whole model's values (a 177k-parameter ResNet-18: 2 MB), past csv's default field limit."""
    if csv.field_size_limit() < PARAMS_FIELD_LIMIT:
        csv.field_size_limit(PARAMS_FIELD_LIMIT)
    return {int(row["step"]): np.array(row[column].split(), dtype=np.float64)
            for row in csv.DictReader(io.StringIO(text)) if row.get(column)}


# ------------------------------------------------------------------ reading a run
def load_job(client, run_id: str, name: str) -> JobEvidence:
    """The evidence of child run `run_id`, downloaded from any store (three folders: records, config, evalkit)."""
    import yaml

    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    run = client.get_run(run_id)
    with tempfile.TemporaryDirectory(prefix="evalkit-probe-") as scratch:
        folders = {}
        for folder in (names.RECORDS_DIR, names.CONFIG_ARTIFACT_DIR, names.SPOOL_ARTIFACT_DIR):
            try:
                folders[folder] = client.download_artifacts(run_id, folder, scratch)
            except Exception:  # noqa: BLE001 - a run that failed early has no records
                folders[folder] = None

        def text(folder: str, file: str) -> str | None:
            path = os.path.join(folders[folder], file) if folders[folder] else None
            if path is None or not os.path.exists(path):
                return None
            with open(path) as fh:
                return fh.read()

        config = yaml.safe_load(text(names.CONFIG_ARTIFACT_DIR, names.RESOLVED_CONFIG_FILE) or "{}") or {}
        evidence = JobEvidence(name, run_id, run.info.status, config, dict(run.data.tags))
        steps, val = text(names.RECORDS_DIR, names.STEPS_CSV_NAME), text(names.RECORDS_DIR, names.VAL_CSV_NAME)
        evidence.steps = parse_rows(steps) if steps else []
        evidence.val = parse_rows(val) if val else []
        for rank in range(evidence.world_size):
            micro = text(names.RECORDS_DIR, names.micro_csv_name(rank))
            if micro is not None:
                evidence.micro[rank] = parse_micro(micro)
        params = text(names.RECORDS_DIR, names.PARAMS_CSV_NAME)
        evidence.params = parse_params(params) if params else {}
        evidence.buffers = parse_params(params, "buffers") if params else {}
        memory = text(names.RECORDS_DIR, names.MEMORY_CSV_NAME)
        evidence.memory = parse_rows(memory) if memory else []
        values = text(names.RECORDS_DIR, names.VALUES_CSV_NAME)
        evidence.values = parse_rows(values) if values else []
        optimizer = text(names.RECORDS_DIR, names.OPTIMIZER_JSON_NAME)
        evidence.optimizer = json.loads(optimizer) if optimizer else []
        effective = text(names.SPOOL_ARTIFACT_DIR, names.EFFECTIVE_CONFIG_FILE)
        summary = text(names.SPOOL_ARTIFACT_DIR, names.summary_file(0))
        evidence.effective = json.loads(effective) if effective else {}
        evidence.summary = json.loads(summary) if summary else {}
        profile = text(names.SPOOL_ARTIFACT_DIR, names.CALL_PROFILE_FILE)
        evidence.profile = json.loads(profile) if profile else {}
    return evidence


def save_fixture(evidence: list[JobEvidence], path: str) -> None:
    """Write a probe's job evidence as one JSON file (tests' recorded fixtures)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as fh:
        fh.write("[\n" + ",\n".join(e.to_json() for e in evidence) + "\n]\n")


def load_fixture(path: str) -> list[JobEvidence]:
    with open(path) as fh:
        return [JobEvidence.from_json(json.dumps(item)) for item in json.load(fh)]
