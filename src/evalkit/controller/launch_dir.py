"""What `evalkit` will create where, checked from the command line before Hydra starts.

By default two things go into the launch directory: Hydra's run directory (`outputs/...`, `multirun/...`)
and the local store `./mlflow.db`. A read-only launch directory fails there as a 24-line Hydra traceback;
this says it in one line. Only what will be created is tried: with `hydra.run.dir` (`hydra.sweep.dir`) and
`tracking.uri` pointing elsewhere, a read-only launch directory is fine.
"""
from __future__ import annotations

import os

from omegaconf import OmegaConf

from evalkit.controller.tracking import fix_default_uri, sqlite_path
from evalkit.controller.writable import write_problem

CONFIG_YAML = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "conf", "config.yaml")
# Hydra flags that print something and exit without creating a run directory.
INFO_FLAGS = ("--help", "-h", "--hydra-help", "--cfg", "-c", "--info", "-i", "--shell-completion", "-sc",
              "--version")


def cwd_problem() -> str | None:
    """One line when the working directory no longer exists (deleted or moved while the shell was in it: every
    relative path, the default store's included, would fail), else None."""
    try:
        os.getcwd()
    except FileNotFoundError:
        return ("the working directory no longer exists (it was deleted or moved while this shell was in it): cd "
                "to an existing folder (e.g. cd ~) and run the command again")
    return None


def launch_dir_problem(argv: list[str]) -> str | None:
    """One line naming the folder that takes no new files and the fix, or None when evalkit can start."""
    if any(arg.split("=", 1)[0] in INFO_FLAGS for arg in argv):
        return None
    multirun = "-m" in argv or "--multirun" in argv
    key = "hydra.sweep.dir" if multirun else "hydra.run.dir"
    run_dir = override(argv, key) or default_output_dir(multirun)
    places = [(f"the run directory ({key})", run_dir.split("${", 1)[0] or ".", f"{key}=<folder>")]
    shared = override(argv, "distributed.shared_dir")     # a job over several nodes: its directory on every node
    if shared not in (None, "", "null"):
        places.append(("the shared directory (distributed.shared_dir)", shared, "distributed.shared_dir=<folder>"))
    store = default_store_path(argv)
    if store:
        places.append(("the store mlflow.db", os.path.dirname(store), "tracking.uri=sqlite:///<folder>/mlflow.db"))
    failing = [(what, fix, problem) for what, folder, fix in places if (problem := write_problem(folder))]
    if not failing:
        return None
    return (f"cannot create {' or '.join(what for what, _, _ in failing)} ({failing[0][2]}): run evalkit from a "
            f"writable directory, or set {' and '.join(fix for _, fix, _ in failing)} with a writable <folder>")


def override(argv: list[str], key: str) -> str | None:
    """The value the command line gives `key` (`key=`, `+key=`, `++key=`; the last one wins), or None."""
    values = [arg.split("=", 1)[1] for arg in argv if "=" in arg and arg.split("=", 1)[0].lstrip("+") == key]
    return values[-1].strip("'\"") if values else None


def default_output_dir(multirun: bool) -> str:
    """The run (sweep) directory pattern of conf/config.yaml, unresolved: `outputs/${now:...}/...`."""
    hydra = OmegaConf.to_container(OmegaConf.load(CONFIG_YAML), resolve=False).get("hydra") or {}
    default = "multirun" if multirun else "outputs"
    return (hydra.get("sweep" if multirun else "run") or {}).get("dir") or default


def default_store_path(argv: list[str]) -> str | None:
    """The local store's file when no tracking.uri (nor a tracking group with one, nor MLFLOW_TRACKING_URI)
    chooses another store; else None."""
    chosen = override(argv, "tracking.uri")
    if chosen not in (None, "", "null") or override(argv, "tracking") not in (None, "local"):
        return None
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return None
    return sqlite_path(fix_default_uri())
