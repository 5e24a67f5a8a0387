"""Sweeps that can be resumed: every job carries a fingerprint of its resolved config (the tracking settings and
the resume switch aside), and a job of a sweep run with `sweep.resume=true` whose fingerprint already has a
FINISHED run in the store is not run again: that run is reused, and the sweep's parent lists it (tag
`evalkit.jobs_reused`, artifact `sweep/reused_runs.json`, which the verdict reads with the sweep)."""
from __future__ import annotations

import hashlib
import json

from mlflow.tracking import MlflowClient
from omegaconf import DictConfig, OmegaConf

from evalkit import names

IGNORED = ("tracking", "sweep", "run_name")    # where a job records and how it is named do not change what it does
# Where the nodes of a multi-node job meet, and which node reads the config: every node of one job computes the
# fingerprint node 0 recorded (the number of nodes, which splits the ranks, counts).
IGNORED_DISTRIBUTED = ("node_rank", "master_addr", "master_port", "shared_dir", "node_timeout_s")


def fingerprint(cfg: DictConfig) -> str:
    """16 hex digits of a SHA-256 over the resolved config without IGNORED (equal configs, equal fingerprint)."""
    resolved = OmegaConf.to_container(cfg, resolve=True)
    for key in IGNORED:
        resolved.pop(key, None)
    for key in IGNORED_DISTRIBUTED:
        resolved.get("distributed", {}).pop(key, None)
    if resolved.get("trainer", {}).get("env", "set") is None:    # evalkit's interpreter: as before trainer.env
        resolved["trainer"].pop("env")
    return hashlib.sha256(json.dumps(resolved, sort_keys=True, default=str).encode()).hexdigest()[:16]


def finished_run(client: MlflowClient, experiment_id: str, print_: str, role: str) -> str | None:
    """The newest FINISHED run of `role` with fingerprint `print_` in the experiment, or None."""
    query = (f"tags.`{names.FINGERPRINT}` = '{print_}' and tags.`{names.ROLE}` = '{role}' "
             "and attributes.status = 'FINISHED'")
    found = client.search_runs([experiment_id], query, max_results=1, order_by=["attributes.start_time DESC"])
    return found[0].info.run_id if found else None

