"""Stopping on Ctrl-C or SIGTERM without losing a record.

While a job runs, the first SIGINT/SIGTERM is only noted: the controller stops the workers at its next
check, ships the whole spool, uploads the records and logs, and ends the run KILLED; then `Interrupted`
ends the command (and the sweep, whose parent run is ended KILLED too). A second signal interrupts at
once. `Interrupted` derives from KeyboardInterrupt so that it passes through Hydra's multirun loop, which
catches only `Exception`.
"""
from __future__ import annotations

import os
import signal
from typing import Any

# A job submitit runs on SLURM also stops on submitit's time-out signal (SUBMITIT_PREEMPT_SIGNAL, USR2 by default,
# sent hydra.launcher.signal_delay_s before the time limit): submitit's own handler would end the process with the
# job's run left RUNNING and its workers orphaned.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def time_out_signal() -> signal.Signals | None:
    """submitit's time-out signal where this process is a job submitit runs on SLURM, else None."""
    if os.environ.get("SUBMITIT_EXECUTOR") != "slurm":
        return None
    return getattr(signal, "SIG" + os.environ.get("SUBMITIT_PREEMPT_SIGNAL", "USR2"), signal.SIGUSR2)


def stop_signals() -> tuple[signal.Signals, ...]:
    return (*STOP_SIGNALS, *filter(None, [time_out_signal()]))


def interruption(signame: str) -> str:
    """What stopped the job, in words: "interrupted by SIGTERM", or SLURM's time limit for submitit's signal."""
    limit = time_out_signal()
    if limit is not None and signame == limit.name:
        return (f"stopped at SLURM's time limit (submitit's {signame}, sent hydra.launcher.signal_delay_s before "
                "hydra.launcher.timeout_min ran out)")
    return f"interrupted by {signame}"


def ended_status(signame: str) -> str:
    """How a run the signal stopped ends: FAILED at SLURM's time limit (the job did not finish in the time it
    asked for, a failure to act on), KILLED when someone stopped it (Ctrl-C, SIGTERM, scancel)."""
    limit = time_out_signal()
    return "FAILED" if limit is not None and signame == limit.name else "KILLED"


class Interrupted(KeyboardInterrupt):
    """evalkit was asked to stop; the message says what was kept (and how to finish recording, if needed)."""

    def __init__(self, signame: str, message: str = ""):
        super().__init__(message or f"interrupted by {signame}")
        self.signame = signame

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else f"interrupted by {self.signame}"

    @property
    def exit_code(self) -> int:
        """The shell's convention: 128 + the signal's number (130 for SIGINT, 143 for SIGTERM)."""
        return 128 + getattr(signal, self.signame, signal.SIGINT).value


class InterruptedAgain(Interrupted):
    """A second stop signal while the first was being handled: stop at once."""


def raise_on_stop_signals() -> None:
    """Outside a job, SIGTERM interrupts like Ctrl-C does (by default it would end the process with no
    chance to close the sweep's parent run)."""
    def interrupt(signum: int, frame: Any) -> None:
        raise Interrupted(signal.Signals(signum).name)

    for sig in stop_signals():
        signal.signal(sig, interrupt)


class StopRequest:
    """While active: the first stop signal is noted in `signame` for the controller to act on at its next
    check; a second raises `Interrupted` at once."""

    def __init__(self) -> None:
        self.signame: str | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> "StopRequest":
        for sig in stop_signals():
            self._previous[sig] = signal.getsignal(sig)
            signal.signal(sig, self._note)
        return self

    def __exit__(self, *exc: Any) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def _note(self, signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        if self.signame is not None:
            raise InterruptedAgain(name, f"interrupted again by {name} while the run was being recorded")
        self.signame = name
