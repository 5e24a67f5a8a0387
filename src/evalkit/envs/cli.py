"""`evalkit-env`: the wrappers' environments, one per pinned requirement, for `trainer.env=<name>`.

    evalkit-env create pytorch-ignite==0.4.11          # -> pytorch-ignite-0.4.11 (cached: a second create returns it)
    evalkit-env create transformers==4.45.2 accelerate==0.34.2 --name hf-4.45
    evalkit-env list
    evalkit-env remove pytorch-ignite-0.4.11
"""
from __future__ import annotations

import argparse
import sys

from evalkit.envs.create import CreateRefused, create
from evalkit.envs.store import EnvUnavailable, all_envs, envs_root, remove


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="evalkit-env", description=__doc__.split("\n\n")[0],
                                     epilog=f"Environments live in {envs_root()} (EVALKIT_ENVS_DIR to move them).")
    commands = parser.add_subparsers(dest="command", required=True)
    make = commands.add_parser("create", help="create (or find) the environment of these pinned requirements")
    make.add_argument("requirements", nargs="+", help="pip requirements, the wrapper's own first (e.g. "
                                                      "pytorch-ignite==0.4.11)")
    make.add_argument("--name", help="its name (default: derived from the requirements)")
    commands.add_parser("list", help="the environments, what each was created from, and when")
    drop = commands.add_parser("remove", help="delete an environment")
    drop.add_argument("name")
    args = parser.parse_args(argv)
    try:
        if args.command == "create":
            return _create(args.requirements, args.name)
        if args.command == "remove":
            print(f"evalkit-env: removed {remove(args.name).path}")
            return 0
        return _list()
    except (CreateRefused, EnvUnavailable) as exc:
        print(f"evalkit-env: {exc}", file=sys.stderr)
        return 1


def _create(requirements: list[str], name: str | None) -> int:
    env, created = create(requirements, name, say=lambda line: print(f"evalkit-env: {line}", flush=True))
    manifest = env.manifest() or {}
    shadows = ", ".join(f"{k} {v} (evalkit's: {manifest['shadows'][k]})" for k, v in manifest.get("installed", {})
                        .items() if k in manifest.get("shadows", {})) or "none"
    resolved = ", ".join(f"{k} {v}" for k, v in manifest.get("resolved", {}).items())
    print(f"evalkit-env: {'created' if created else 'exists (created ' + manifest.get('created', '?') + ')'}: "
          f"{env.name} in {env.path}: {resolved}, beside torch {manifest.get('torch')}; shadows {shadows}")
    print(f"evalkit-env: run with trainer.env={env.name}")
    return 0


def _list() -> int:
    found = all_envs()
    if not found:
        print(f"evalkit-env: no environment in {envs_root()}")
    for env in found:
        manifest = env.manifest()
        if manifest is None:
            print(f"{env.name}\tincomplete (evalkit-env remove {env.name})")
            continue
        resolved = " ".join(f"{k}=={v}" for k, v in manifest.get("resolved", {}).items())
        print(f"{env.name}\t{resolved}\ttorch {manifest.get('torch')}\tcreated {manifest.get('created')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
