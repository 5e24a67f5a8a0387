"""`evalkit-eval`: the quick evaluation a user comes for.

Runs the baseline and every installed wrapper on a smoke-scale task over several seeds (one Hydra
multirun, one MLflow parent run), then prints the verdict table and writes the report.

    evalkit-eval                                  # every installed wrapper, 5 seeds, mlp_regression
    evalkit-eval --trainers lightning,accelerate --seeds 8 -- precision=bf16_mixed
    evalkit-eval --probes none                    # no probe: the training sweep and its verdict only
    evalkit-eval --thorough                       # every task, 8 seeds, the probes at full scale

Then every probe evalkit has runs for every wrapper (both modes, `aligned` and `defaults`, except where the
preset says otherwise), one multirun per probe under the same sweep id; the verdict reads them all. The presets
(what each runs, at which settings) are in evalkit/presets.py, each probe's part beside the probe (the `PRESETS` of
its settings module).
"""
from __future__ import annotations

import argparse
import contextlib
import difflib
import os
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

from evalkit import names
from evalkit.cli import run_sweep
from evalkit.controller.launch.warm_server import close_all
from evalkit.controller.launch_dir import cwd_problem
from evalkit.controller.progress import say, time_left
from evalkit.controller.tracking import display_uri, resolve_uri
from evalkit.hydra_errors import error_line, sweep_jobs
from evalkit.presets import PRESETS, Preset, plan_for, probe_overrides, sweep_overrides
from evalkit.probes.catalog import probe_names, probe_with
from evalkit.trainers import installed_trainers
from evalkit.verdict.cli import fail_on_problem, split_mlflow_args


def _no_such_trainer(name: str, known: list[str]) -> str:
    close = difflib.get_close_matches(name, known, n=1)
    return f"{name}: no such trainer" + (f", did you mean {close[0]}?" if close else "")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="evalkit-eval", description=__doc__.split("\n\n")[0], epilog=EXIT_CODES,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trainers", help="comma-separated trainers (default: baseline + every installed wrapper)")
    parser.add_argument("--seeds", type=int, help="seeds per arm (default: the preset's, 3 quick, 8 thorough)")
    parser.add_argument("--thorough", action="store_true",
                        help="every bundled task, more seeds, consistency under bf16/fp16/world size 2, the "
                             "performance probe with a minute of turns in both modes (hours, not minutes)")
    parser.add_argument("--out", default="verdict", help="report directory (default ./verdict)")
    parser.add_argument("--scenario", default="balanced", help="ranking weights: balanced, research, platform")
    parser.add_argument("--fail-on", metavar="DIM[,DIM][,inconclusive][,not-run]",
                        help="CI gate: exit 3 when one of these dimensions fails for a wrapper (the verdict's "
                             "--fail-on, checked before anything trains); junit.xml and summary.md beside the report")
    parser.add_argument("--probes", default="all",
                        help="comma-separated probes to run after training (default: all; none: no probe)")
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument("--quiet", action="store_true", help="print only problems, the verdict and where to look")
    shown.add_argument("--plain", action="store_true",
                       help="progress as plain lines (the default on a terminal rewrites one line per job; "
                            "plain is also what a pipe, a log file or CI gets)")
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides for every job (after --); a probe's "
                                                     "setting (probe.<key>=...) for that probe's jobs only")
    return parser


@dataclass
class Evaluation:
    """What one `evalkit-eval` runs: its preset, trainers, probes and settings, checked before anything trains."""

    args: argparse.Namespace
    preset: Preset
    trainers: list[str]
    probes: list[str]
    progress: str

    @property
    def wrappers(self) -> list[str]:
        return [t for t in self.trainers if t != "baseline"]

    @property
    def quiet_hydra(self) -> list[str]:
        return ["hydra/hydra_logging=disabled"] if self.args.quiet else []   # Hydra's own "Launching ..." lines


def _evaluation(args: argparse.Namespace) -> Evaluation | str:
    """The evaluation the arguments ask for, or every problem with them (one line each) before anything trains."""
    progress = "quiet" if args.quiet else "plain" if args.plain else "auto"
    if progress != "auto":
        args.overrides = [f"tracking.progress={progress}", *args.overrides]
    preset = PRESETS["thorough" if args.thorough else "quick"]
    args.seeds = preset.seeds if args.seeds is None else args.seeds
    problem = cwd_problem() or argument_problem(args.seeds, args.scenario) or fail_on_problem(args.fail_on) or \
        probes_problem(args.probes, args.overrides)
    if problem:
        return problem
    ready, missing = installed_trainers()
    trainers = args.trainers.split(",") if args.trainers else ready
    if "baseline" not in trainers:
        trainers.insert(0, "baseline")
    unknown = [t for t in trainers if t not in ready]
    if unknown:
        hints = "; ".join(f"{t}: {missing[t]}" if t in missing else _no_such_trainer(t, [*ready, *missing])
                          for t in unknown)
        known = f"; choose from {', '.join(ready)}" if any(t not in missing for t in unknown) else ""
        return f"cannot run {hints}{known}"
    ev = Evaluation(args, preset, trainers, selected_probes(args.probes), progress)
    problems = job_problems(sweep_overrides(preset, trainers, [args.seeds - 1], for_sweep(args.overrides, None)))
    for probe in ev.probes if ev.wrappers else []:
        problems = problems or job_problems(probe_overrides(probe, plan_for(preset, probe), ev.wrappers,
                                                            for_sweep(args.overrides, probe)))
    if problems:
        return "\nevalkit-eval: ".join([*problems, "nothing was trained; fix the above and run again"])
    for name, hint in missing.items():
        print(f"evalkit-eval: skipping {name} (not installed: {hint})", file=sys.stderr)
    return ev


def _train_and_probe(ev: Evaluation, uri: str, sweep: str) -> tuple[int, int] | int:
    """The training sweep, then each probe's sweep, in this process: (the training's exit code, the probes'); an
    exit code alone where the evaluation stops (interrupted, or nothing recorded to judge)."""
    args, preset = ev.args, ev.preset
    started = time.monotonic()
    train = run_sweep([*sweep_overrides(preset, ev.trainers, range(args.seeds), for_sweep(args.overrides, None)),
                       *ev.quiet_hydra])
    if train >= INTERRUPTED:
        return train
    if train and not jobs_recorded(uri, sweep):
        print(f"evalkit-eval: the training sweep failed before any job was recorded (exit code {train}, "
              "see above): nothing to judge", file=sys.stderr)
        return train
    say(ev.progress, f"evalkit-eval: training done in {time.monotonic() - started:.0f} s"
                     f"{'' if train == 0 else ' (some jobs failed: see the functional column)'}")
    probed = 0
    for probe in ev.probes if ev.wrappers else []:
        started, plan = time.monotonic(), plan_for(preset, probe)
        say(ev.progress, f"evalkit-eval: probe {probe} for {', '.join(ev.wrappers)} in {' and '.join(plan.modes)} "
                         "mode")
        code = run_sweep([*probe_overrides(probe, plan, ev.wrappers, for_sweep(args.overrides, probe)),
                          *ev.quiet_hydra])
        if code >= INTERRUPTED:
            return code
        probed = probed or code
        say(ev.progress, f"evalkit-eval: probe {probe} done in {time.monotonic() - started:.0f} s"
                         f"{'' if code == 0 else ' (some probes could not run: see above)'}")
    return train, probed


def main(argv: list[str] | None = None) -> int:
    ev = _evaluation(_parser().parse_args(argv))
    if isinstance(ev, str):
        print(f"evalkit-eval: {ev}", file=sys.stderr)
        return 2
    args, preset = ev.args, ev.preset
    uri = store_uri(args.overrides)
    sweep = f"quick-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:4]}"
    jobs = len(ev.trainers) * args.seeds * len(preset.tasks)
    say(ev.progress, f"evalkit-eval: {preset.name}: {jobs} jobs ({', '.join(ev.trainers)} x {args.seeds} seeds x "
                     f"{', '.join(preset.tasks)}), sweep {sweep}, store {display_uri(uri)}")
    say(ev.progress, f"evalkit-eval: plan: {plan_text(jobs, probe_jobs(preset, ev.probes, len(ev.wrappers)), preset)}")
    # Every sweep runs in this process, one after another (evalkit.cli.run_sweep): evalkit's start is paid once and
    # the warm worker servers of the training sweep serve every probe's (each job still a fresh fork).
    with sweep_environment(sweep, uri):
        ran = _train_and_probe(ev, uri, sweep)
    if isinstance(ran, int):
        return ran
    train, probed = ran
    say(ev.progress, "evalkit-eval: judging...")

    from evalkit.verdict.cli import main as verdict

    gate = ["--fail-on", args.fail_on] if args.fail_on is not None else []
    code = verdict(["--tracking-uri", uri, "--sweep-id", sweep, "--out", args.out, "--scenario", args.scenario, *gate])
    return code or (1 if train or probed else 0)


@contextlib.contextmanager
def sweep_environment(sweep: str, uri: str) -> Iterator[None]:
    """The sweep id and the store for the sweeps run inside, then the environment as it was and the warm worker
    servers closed (their memory back before the verdict)."""
    keys = (names.SWEEP_NAME_ENV, "MLFLOW_TRACKING_URI")
    saved = {key: os.environ.get(key) for key in keys}
    os.environ.update(zip(keys, (sweep, uri)))
    try:
        yield
    finally:
        close_all()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def argument_problem(seeds: int, scenario: str) -> str | None:
    """What is wrong with the command-line options (checked before anything runs), or None."""
    from evalkit.verdict.scenarios import ScenarioError, load_scenarios

    if seeds < 1:
        return f"--seeds {seeds}: each arm needs at least one seed (e.g. --seeds 5)"
    try:
        scenarios = load_scenarios()
    except ScenarioError as exc:
        return str(exc)
    if scenario not in scenarios:
        return f"--scenario {scenario!r} unknown; choose from {', '.join(sorted(scenarios))}"
    return None


INTERRUPTED = 128     # an exit code from here up: the sweep was stopped by a signal (Ctrl-C), nothing more runs
EXIT_CODES = """exit codes:
  0    every job and probe ran, the verdict is recorded, and no --fail-on cell failed
  1    some job or probe failed (the verdict still judges what ran: see its functional column)
  2    bad input: nothing was trained (one line names it and the fix)
  3    the --fail-on gate failed for a wrapper (the verdict names the cells)
  4    the verdict is printed but could not be recorded (the message names the folder that keeps it)
  130  interrupted (Ctrl-C): what ran is recorded
The report goes to --out (verdict.html, verdict.md, verdict.json), with junit.xml and summary.md for CI (docs/ci.md)."""
# Wall time on a 2-core machine like the one evalkit is developed on; an estimate, not a promise: the sweep's own
# progress lines give the time left as it goes. Measured on the quick evaluation of 2026-12-06 16:41 (12 min 26 s,
# every sweep in one process, workers forked from warm servers; the performance probe in both modes): the
# training sweep's seconds per job, each sweep's start (Hydra composing it; evalkit's own start is paid once) and the
# verdict. A probe's seconds per job are its preset's (`ProbePlan.job_s`, beside the probe), measured in that run.
TRAIN_JOB_S, SWEEP_START_S, VERDICT_S = 3.4, 1.0, 20.0


def probe_jobs(preset: Preset, probes: list[str], wrappers: int) -> dict[str, tuple[int, int]]:
    """probe -> (probe runs, jobs in all) the preset makes of it."""
    out = {}
    for probe in probes if wrappers else []:
        plan = plan_for(preset, probe)
        runs = wrappers * len(plan.modes)
        out[probe] = (runs, runs * plan.jobs_per_run)
    return out


def plan_text(train_jobs: int, probes: dict[str, tuple[int, int]], preset: Preset) -> str:
    """`12 training jobs (~1 min), semantics 10 runs / 40 jobs (~4 min), ..., then the verdict: about 6 min in
    all`."""
    train = SWEEP_START_S + train_jobs * TRAIN_JOB_S
    parts = [f"{train_jobs} training jobs (~{time_left(train)})"]
    total = train + VERDICT_S
    for probe, (runs, jobs) in probes.items():
        seconds = SWEEP_START_S + jobs * plan_for(preset, probe).job_s
        parts.append(f"{probe} {runs} runs / {jobs} jobs (~{time_left(seconds)})")
        total += seconds
    return ", ".join(parts) + f", then the verdict: about {time_left(total)} in all"


def selected_probes(option: str) -> list[str]:
    if option == "all":
        return list(probe_names())
    return [] if option == "none" else option.split(",")


def probes_problem(option: str, overrides: list[str] = ()) -> str | None:
    """What is wrong with `--probes` and the probe settings after `--` (each must be a setting of a probe that
    runs), or None."""
    unknown = [p for p in selected_probes(option) if p not in probe_names()]
    if unknown:
        return (f"--probes {option}: {', '.join(unknown)} is not a probe; "
                f"choose from all, none, {', '.join(probe_names())}")
    for override in overrides:
        key = _probe_setting(override)
        owners = probe_with(key) if key is not None else []
        if key is not None and not owners:
            return f"{override}: no probe has this setting"
        if key is not None and not set(owners) & set(selected_probes(option)):
            return (f"{override}: a setting of {' or '.join(f'probe={p}' for p in owners)}, which --probes {option} "
                    "does not run")
    return None


def for_sweep(overrides: list[str], probe: str | None) -> list[str]:
    """The overrides after `--` that one sweep takes (`probe`: the probe it runs; None: the training sweep): a
    probe's setting (`probe.<key>=...`) only the sweeps of the probes that have it, anything else every sweep."""
    return [o for o in overrides if (key := _probe_setting(o)) is None or probe in probe_with(key)]


def _probe_setting(override: str) -> str | None:
    """`seeds` for `probe.seeds=2` (or `+probe.seeds=2`); None for an override of anything else."""
    key = override.lstrip("+~").split("=", 1)[0]
    return key.removeprefix("probe.") if key.startswith("probe.") else None


def store_uri(overrides: list[str]) -> str:
    """The store the sweep records into and the verdict reads: a `tracking.uri=` override (it wins over
    MLFLOW_TRACKING_URI in every job), else MLFLOW_TRACKING_URI, else the local store ./mlflow.db."""
    chosen = [o.split("=", 1)[1] for o in overrides if o.lstrip("+").startswith("tracking.uri=")]
    return resolve_uri(chosen[-1] if chosen and chosen[-1] not in ("", "null") else None)


def job_problems(overrides: list[str]) -> list[str]:
    """Compose every job of the sweep `overrides` describe, as `evalkit -m` will, and validate it: each
    problem once, one line each (empty: every job is valid)."""
    from hydra import compose, initialize_config_module
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from evalkit.config import register_configs, validate

    register_configs()
    try:
        jobs = sweep_jobs(overrides)
    except HydraException as exc:
        return [f"bad override: {error_line(exc)}"]
    problems: dict[str, None] = {}
    with initialize_config_module("evalkit.conf", version_base=None):
        for job in jobs:
            try:
                found = [f"invalid config: {p}" for p in validate(compose("config", overrides=job))]
            except (HydraException, OmegaConfBaseException) as exc:
                found = [f"bad override: {error_line(exc)}"]
            problems.update(dict.fromkeys(found))
    return list(problems)


def jobs_recorded(uri: str, sweep: str) -> int:
    """How many job runs of `sweep` the store holds (0 when it cannot be read; a missing SQLite file is not
    created)."""
    from mlflow.tracking import MlflowClient

    if uri.startswith("sqlite:///") and not os.path.exists(uri.removeprefix("sqlite:///")):
        return 0
    try:
        client = MlflowClient(uri)
        experiments = [e.experiment_id for e in client.search_experiments()]
        query = f"tags.`{names.ROLE}` = '{names.ROLE_JOB}' and tags.`{names.SWEEP_ID}` = '{sweep}'"
        return len(client.search_runs(experiments, query, max_results=1))
    except Exception:  # noqa: BLE001 - an unreadable store holds nothing to judge either
        return 0


if __name__ == "__main__":
    sys.exit(main(split_mlflow_args(sys.argv[1:])))
