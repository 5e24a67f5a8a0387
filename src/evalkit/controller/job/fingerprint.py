"""Sweeps that can be resumed: every job carries a fingerprint of its resolved config (the tracking settings and
the resume switch aside) and of the versions that made its cells (`versions`: the wrapper's distributions as the
job's workers import them, torch, evalkit, and for a probe run its judges' source), and a job of a sweep run with
`sweep.resume=true` whose fingerprint already has a FINISHED run in the store is not run again: that run is reused,
and the sweep's parent lists it (tag `evalkit.jobs_reused`, artifact `sweep/reused_runs.json`, which the verdict
reads with the sweep). A FINISHED run of the same config at other versions (tag `evalkit.config_fingerprint`, or
the fingerprint of a run recorded before the fingerprint held versions) is run again, and `stale_versions` says
which versions changed."""
from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from importlib import metadata
from pathlib import Path

from mlflow.tracking import MlflowClient
from omegaconf import DictConfig, OmegaConf

from evalkit import names, trainers
from evalkit.envs.naming import canonical
from evalkit.envs.store import EnvUnavailable
from evalkit.envs.store import env as named_env

IGNORED = ("tracking", "sweep", "run_name")    # where a job records and how it is named do not change what it does
# Where the nodes of a multi-node job meet, and which node reads the config: every node of one job computes the
# fingerprint node 0 recorded (the number of nodes, which splits the ranks, counts).
IGNORED_DISTRIBUTED = ("node_rank", "master_addr", "master_port", "shared_dir", "node_timeout_s")


JUDGES = "evalkit judges"        # the key of a probe run's judges in `versions`
JUDGES_SOURCE = ("probes", "analysis")   # evalkit's packages whose code judges a probe run's records


def fingerprint(cfg: DictConfig) -> str:
    """16 hex digits of a SHA-256 over the resolved config without IGNORED and the `versions` it runs with (equal
    configs at equal versions, equal fingerprint)."""
    return _digest({"config": _resolved(cfg), "versions": versions(cfg)})


def config_fingerprint(cfg: DictConfig) -> str:
    """The fingerprint of the config alone (what `fingerprint` was before it held versions): the same job at any
    versions."""
    return _digest(_resolved(cfg))


def _digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _resolved(cfg: DictConfig) -> dict:
    resolved = OmegaConf.to_container(cfg, resolve=True)
    for key in IGNORED:
        resolved.pop(key, None)
    for key in IGNORED_DISTRIBUTED:
        resolved.get("distributed", {}).pop(key, None)
    if resolved.get("trainer", {}).get("env", "set") is None:    # evalkit's interpreter: as before trainer.env
        resolved["trainer"].pop("env")
    return resolved


def versions(cfg: DictConfig) -> dict[str, str]:
    """What a job's cells depend on besides its config: the installed version of each distribution the trainer's
    wrapper needs (in the trainer's environment with `trainer.env`, where its workers import them), torch's and
    evalkit's; a probe run's cells are made by its judges: their source's digest too (evalkit's version is not
    raised at every change of a judge)."""
    out = _wrapper_versions(cfg.trainer)
    out["torch"], out["evalkit"] = _installed("torch"), _installed("evalkit")
    if cfg.get("probe") is not None and cfg.probe.get("_target_"):
        out[JUDGES] = judges_version()
    return out


def _installed(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


def _wrapper_versions(trainer: DictConfig) -> dict[str, str]:
    """distribution -> version for the trainer's requirements: evalkit's environment's, or with `trainer.env` those
    the environment's site-packages hold (it reuses evalkit's for the rest)."""
    out = trainers.versions(trainer)
    if not trainer.get("env"):
        return out
    try:
        own = {canonical(name): version for name, version in named_env(trainer.env).installed().items()}
    except EnvUnavailable:      # a name no environment can have: the preflight refuses the job
        own = {}
    return {name: own.get(canonical(name), version) for name, version in out.items()}


@lru_cache(maxsize=1)
def judges_version() -> str:
    """12 hex digits of a SHA-256 over the source of evalkit's judges (JUDGES_SOURCE), as this process finds it."""
    root, digest = Path(__file__).resolve().parents[1], hashlib.sha256()
    for package in JUDGES_SOURCE:
        for path in sorted((root / package).rglob("*.py")):
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def version_tags(cfg: DictConfig) -> dict[str, str]:
    """The tags that let a later `sweep.resume` tell a run of the same config at other versions: the config's own
    fingerprint and the versions the fingerprint holds."""
    return {names.CONFIG_FINGERPRINT: config_fingerprint(cfg),
            names.FINGERPRINTED_VERSIONS: json.dumps(versions(cfg), sort_keys=True)}


def finished_run(client: MlflowClient, experiment_id: str, print_: str, role: str,
                 tag: str = names.FINGERPRINT) -> str | None:
    """The newest FINISHED run of `role` whose `tag` (the fingerprint) is `print_` in the experiment, or None."""
    query = (f"tags.`{tag}` = '{print_}' and tags.`{names.ROLE}` = '{role}' "
             "and attributes.status = 'FINISHED'")
    found = client.search_runs([experiment_id], query, max_results=1, order_by=["attributes.start_time DESC"])
    return found[0].info.run_id if found else None


def stale_versions(client: MlflowClient, experiment_id: str, cfg: DictConfig, role: str) -> tuple[str, str] | None:
    """(run id, what changed: `lightning 2.5.3, now 2.6.6`) for the newest FINISHED run of this config recorded at
    other versions than the installed ones, or None. A run recorded before the fingerprint held versions is found
    by its fingerprint (the config's alone) and read through the version tags it has."""
    own = config_fingerprint(cfg)
    run_id = finished_run(client, experiment_id, own, role, names.CONFIG_FINGERPRINT) \
        or finished_run(client, experiment_id, own, role)
    if run_id is None:
        return None
    tags = client.get_run(run_id).data.tags
    return run_id, changed(recorded_versions(tags, cfg), versions(cfg))


def recorded_versions(tags: dict[str, str], cfg: DictConfig) -> dict[str, str]:
    """The versions a run recorded: those its fingerprint held, else (a run of before) its workers' version tags."""
    if tags.get(names.FINGERPRINTED_VERSIONS):
        try:
            return dict(json.loads(tags[names.FINGERPRINTED_VERSIONS]))
        except (ValueError, TypeError):
            return {}
    found = {key[len(names.VERSION_PREFIX):]: value for key, value in tags.items()
             if key.startswith(names.VERSION_PREFIX)}
    wrapper = trainers.wrapper_distribution(cfg.trainer)
    if wrapper and tags.get(names.WRAPPER_VERSION):
        found.setdefault(wrapper, tags[names.WRAPPER_VERSION])
    if tags.get(names.TORCH_VERSION):
        found.setdefault("torch", tags[names.TORCH_VERSION])
    return found


def changed(recorded: dict[str, str], now: dict[str, str]) -> str:
    """`lightning 2.5.3, now 2.6.6; ...` for every version that differs (`no evalkit version, now 0.1.0` where the
    run recorded none)."""
    parts = [f"{name} {recorded[name]}, now {version}" if name in recorded else f"no {name} version, now {version}"
             for name, version in now.items() if recorded.get(name) != version]
    return "; ".join(parts) or "the same versions"

