"""`evalkit`: the Hydra app. One job per composed config; `-m` sweeps, nested under one parent run.

The config tree is found through the package (`evalkit/conf`), so the command works from any directory.
"""
from __future__ import annotations

import os
import shlex
import sys
from typing import NoReturn

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from evalkit import names
from evalkit.config import config_warnings, register_configs, validate
from evalkit.controller.interrupt import Interrupted, ended_status, interruption, raise_on_stop_signals
from evalkit.controller.job.rundir import RunDirBusy
from evalkit.controller.progress import hush_libraries
from evalkit.controller.tracking import TrackingUnavailable, fix_default_uri, mask_secrets_in_log

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
# The shipper retries every flush interval with the spool as its buffer: MLflow's own HTTP retries (minutes
# per call by default) would only keep the controller from watching its workers during a server outage.
os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "15")
register_configs()
_failures: list[str] = []
MODE_FLAGS_CONFLICT = (
    "only one of --multirun (-m), --cfg (-c), --info (-i), --run and --shell-completion can be given at once. To see "
    "a sweep's settings, leave out -m and give one value per key: `evalkit --cfg job seed=0` prints that job's config, "
    "`evalkit --cfg hydra hydra/launcher=joblib` the launcher's; then run the sweep with -m alone")
HYDRA_RAISES_ENV = "EVALKIT_HYDRA_RAISES"     # set with HYDRA_FULL_ERROR=1 when evalkit, not the user, set it
LAUNCHER_LOGGERS = ("hydra._internal.core_plugins.basic_launcher",
                    "hydra_plugins.hydra_joblib_launcher._core",
                    "hydra_plugins.hydra_submitit_launcher.submitit_launcher")


@hydra.main(version_base=None, config_path="conf", config_name="config")
def _app(cfg: DictConfig):
    problems = _from_srun(cfg) or validate(cfg)
    if problems:   # nothing recorded: an invalid config is not a run
        for problem in problems:
            print(f"evalkit: invalid config: {problem}", file=sys.stderr)
        _failures.append(problems[0])
        return None
    for warning in config_warnings(cfg):
        print(f"evalkit: warning: {warning}", file=sys.stderr)
    hush_libraries(cfg.tracking.progress)
    run_dir = HydraConfig.get().runtime.output_dir
    try:
        if cfg.probe.name != "none":
            from evalkit.controller.probe_run import run_probe  # heavy imports after Hydra has parsed the command line

            result = run_probe(cfg, run_dir)
        else:
            from evalkit.controller.job.run import run_job

            result = run_job(cfg, run_dir)
    except (TrackingUnavailable, RunDirBusy) as exc:
        print(f"evalkit: {exc}", file=sys.stderr)
        _failures.append(str(exc))
        if isinstance(exc, TrackingUnavailable) and os.path.exists(os.path.join(run_dir, names.RUN_FILE)):
            from evalkit.controller.job.run import JobResult  # a sweep ships it at its end if the store is back

            return JobResult(None, False, str(exc), "UNSHIPPED", unshipped=run_dir)
        return None
    if not result.ok:
        _failures.append(result.reason)
        what = f"run {result.run_id}" if result.run_id else "job"   # a node k > 0 of a multi-node job records no run
        print(f"evalkit: {what} {result.status or 'FAILED'}: {result.reason}", file=sys.stderr)
    if result.run_id and HydraConfig.get().mode != RunMode.MULTIRUN:   # a sweep prints its parent's instead
        _print_address(cfg, result.run_id)
    return result


def _from_srun(cfg: DictConfig) -> list[str]:
    """Under a multi-node `srun`, the node settings SLURM's variables give (controller/job/srun.py), where the command
    line gave none; a problem when srun's layout is not one evalkit per node."""
    from evalkit.controller.job.srun import SrunLayoutError, srun_settings

    given = {o.split("=", 1)[0].lstrip("+~") for o in HydraConfig.get().overrides.task}
    try:
        found = srun_settings(os.environ, cfg.distributed.get("shared_root"), given)
    except SrunLayoutError as exc:
        return [str(exc)]
    for key, value in found.items():
        cfg.distributed[key] = value
    return []


def _print_address(cfg: DictConfig, run_id: str) -> None:
    from mlflow.tracking import MlflowClient

    from evalkit.controller.tracking import resolve_uri
    from evalkit.controller.ui import open_hint

    uri = resolve_uri(cfg.tracking.uri)
    try:
        exp = MlflowClient(uri).get_run(run_id).info.experiment_id
    except Exception:  # noqa: BLE001 - the store failed after the run was recorded: said above already
        return
    print(open_hint(f"run {run_id}", uri, exp, run_id), file=sys.stderr)


def main() -> None:
    _refuse_unwritable_launch_dir()
    fix_default_uri()
    _check_printed_configs()
    mask_secrets_in_log(*LAUNCHER_LOGGERS)   # they print every job's overrides
    raise_on_stop_signals()
    # Hydra raises what it would print, said below in one line, unless the user asked for its stack traces (an
    # evalkit started by this one inherits the switch, not the request).
    full_trace = os.environ.get("HYDRA_FULL_ERROR") == "1" and not os.environ.get(HYDRA_RAISES_ENV)
    if not full_trace:
        os.environ.update({"HYDRA_FULL_ERROR": "1", HYDRA_RAISES_ENV: "1"})
    try:
        _app()
    except KeyboardInterrupt as exc:
        sys.exit(_interrupted(exc))
    except SystemExit:   # a launcher gave up and exits (a submitit job's process died)
        _end_sweep_on_error()
        raise
    except ValueError as exc:   # Hydra's check of its own flags, before anything is composed
        if not str(exc).startswith("Only one of --run"):
            _hydra_raised(exc, full_trace)
        print(f"evalkit: {MODE_FLAGS_CONFLICT}", file=sys.stderr)
        sys.exit(2)
    except Exception as exc:  # noqa: BLE001 - whatever Hydra would have printed
        _hydra_raised(exc, full_trace)
    finally:
        if not full_trace:
            for name in ("HYDRA_FULL_ERROR", HYDRA_RAISES_ENV):
                os.environ.pop(name, None)
    from evalkit.controller.sweep.callback import failed_jobs, jobs_still_waiting, sweep_ended, sweeps_not_ended

    # A sweep counts its jobs in its ledger (a parallel launcher's jobs fail in other processes; a job whose
    # records waited for the store may have been recorded at the sweep's end).
    failed = failed_jobs() if sweep_ended() else len(_failures)
    waiting = jobs_still_waiting()
    if failed > waiting:
        print(f"evalkit: {failed - waiting} job(s) failed", file=sys.stderr)
    if waiting:      # counted failed by the parent run until evalkit-ship records them
        print(f"evalkit: {waiting} job(s) not recorded yet: their records wait for the store (the evalkit-ship line "
              "above records them)", file=sys.stderr)
    if failed or sweeps_not_ended():   # a parent run left RUNNING is work left to do (its line says which)
        sys.exit(1)


def run_sweep(overrides: list[str], program: str = "evalkit") -> int:
    """`evalkit -m <overrides>` in this process; its exit code (an interrupt's: 128 + the signal's number).

    The process stays ready for the next sweep, so a caller that runs several one after another (the quick
    evaluation's training sweep and its probe sweeps) pays evalkit's start once, and the warm
    worker servers one sweep started (controller/launch/warm_server.py) serve the next. Each sweep gets its own sweep
    directory and counts its own failures; the servers hold imports only, never a job's state (each job is a fresh
    fork)."""
    from evalkit.controller.job.rundir import new_process_uid
    from evalkit.controller.sweep.callback import forget_ended

    argv, sys.argv = sys.argv, [program, "-m", *overrides]
    _failures.clear()
    forget_ended()
    new_process_uid()
    try:
        main()
        return 0
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
    finally:
        sys.argv = argv


def _hydra_raised(exc: Exception, full_trace: bool) -> NoReturn:
    """A bad override (exit 2) or a launcher's failure in one line, anything else with its stack trace (exit 1);
    a sweep that had started ends FAILED."""
    from evalkit.hydra_errors import is_override_error, report

    if not full_trace:
        print(report(exc), file=sys.stderr, flush=True)
    _end_sweep_on_error()
    if full_trace:
        raise exc
    sys.exit(2 if is_override_error(exc) else 1)


def _end_sweep_on_error() -> None:
    """A sweep whose launcher raised (Hydra calls no callback then): its parent ends FAILED, counting the jobs
    its ledger holds, instead of staying RUNNING."""
    sweep, problem = _end_active_sweep("FAILED", "the launcher stopped on an error before every job ended")
    if problem:
        print(f"evalkit: {problem}", file=sys.stderr)
    if not sweep:
        return
    from evalkit.controller.ship.sweep import left_behind

    # A job whose process the launcher lost (killed, out of memory) stays RUNNING until evalkit-ship records it.
    left = left_behind(sweep.sweep_dir, sweep.sweep_id, sweep.ledger)
    hint = f"; {len(left)} job(s) it left unfinished are recorded, and its counts updated, by: evalkit-ship " \
           f"{sweep.sweep_dir}" if left else ""
    print(f"evalkit: the launcher stopped on the error above; sweep run {sweep.parent_id} ended FAILED{hint}",
          file=sys.stderr)


def _check_printed_configs() -> None:
    """`evalkit --cfg job|all ...` prints the config a job composes (Hydra), then checks every value as a run would:
    each problem on a line of its own and exit 2, so a sweep's settings can be checked before it runs."""
    from hydra._internal.hydra import Hydra

    show = Hydra.show_cfg
    if getattr(show, "evalkit_checks", False):
        return

    def show_and_check(self, config_name, overrides, cfg_type, package, resolve=False):
        show(self, config_name, overrides, cfg_type, package, resolve)
        if cfg_type == "hydra":
            return
        cfg = self.compose_config(config_name=config_name, overrides=overrides, run_mode=RunMode.RUN)
        problems = validate(self.get_sanitized_cfg(cfg, "job"))
        for problem in problems:
            print(f"evalkit: invalid config: {problem}", file=sys.stderr)
        if problems:
            sys.exit(2)

    show_and_check.evalkit_checks = True
    Hydra.show_cfg = show_and_check


def _refuse_unwritable_launch_dir() -> None:
    """Exit with one line when a folder the run directory or the local store would be created in takes no
    files (a read-only launch directory): checked before Hydra starts, whose own error is a traceback."""
    from evalkit.controller.launch_dir import cwd_problem, launch_dir_problem

    problem = cwd_problem() or launch_dir_problem(sys.argv[1:])
    if problem:
        print(f"evalkit: {problem}", file=sys.stderr)
        sys.exit(2)


def _end_active_sweep(status: str, reason: str):
    """End this process's running sweep, if any: (the sweep or None, what went wrong or None). Never raises:
    it runs while Hydra exits or an interrupt is reported, and the store may be what failed."""
    from evalkit.controller.sweep.callback import SweepNotEnded, end_active_sweep

    try:
        return end_active_sweep(status, reason), None
    except SweepNotEnded as err:
        return None, f"the sweep: {err}"
    except Exception as err:  # noqa: BLE001 - our own line, never a traceback on top of Hydra's exit
        return None, f"the sweep's parent run could not be ended ({type(err).__name__}: {err})"


def _interrupted(exc: KeyboardInterrupt) -> int:
    """One line for an interrupt (the job already recorded its run); a sweep's parent ends KILLED (FAILED at
    SLURM's time limit)."""
    if not isinstance(exc, Interrupted):
        exc = Interrupted("SIGINT")
    status = ended_status(exc.signame)
    sweep, problem = _end_active_sweep(status, interruption(exc.signame))
    ended = f"; sweep run {sweep.parent_id} ended {status}" if sweep else ""
    print(f"evalkit: {exc.message}{ended}" + (f"; {problem}" if problem else ""), file=sys.stderr)
    return exc.exit_code


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
