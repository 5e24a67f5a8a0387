"""`evalkit`: the Hydra app. One job per composed config; `-m` sweeps, nested under one parent run.

The config tree is found through the package (`evalkit/conf`), so the command works from any directory.
"""
from __future__ import annotations

import os
import shlex
import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from evalkit.config import register_configs
from evalkit.tracking import TrackingUnavailable, fix_default_uri

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
register_configs()
_failures: list[str] = []


@hydra.main(version_base=None, config_path="conf", config_name="config")
def _app(cfg: DictConfig):
    from evalkit.job import run_job  # heavy imports after Hydra has parsed the command line

    run_dir = HydraConfig.get().runtime.output_dir
    try:
        result = run_job(cfg, run_dir)
    except TrackingUnavailable as exc:
        print(f"evalkit: {exc}", file=sys.stderr)
        _failures.append(str(exc))
        return None
    if not result.ok:
        _failures.append(result.reason)
        print(f"evalkit: run {result.run_id} FAILED: {result.reason}", file=sys.stderr)
    return result


def main() -> None:
    fix_default_uri()
    _app()
    if _failures:
        print(f"evalkit: {len(_failures)} job(s) failed", file=sys.stderr)
        sys.exit(1)


def mlflow_entry() -> None:
    """`python -m evalkit.cli [--multirun] "<overrides>"`: MLflow passes `-P overrides="a=1 b=2"` as ONE
    argument; split it the way a shell would before Hydra sees it."""
    args = sys.argv[1:]
    flags = [a for a in args if a in ("-m", "--multirun")]
    rest = [piece for a in args if a not in flags for piece in shlex.split(a)]
    sys.argv = [sys.argv[0], *flags, *rest]
    main()


if __name__ == "__main__":
    mlflow_entry()
