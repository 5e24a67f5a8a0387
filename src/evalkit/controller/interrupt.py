"""Stopping on Ctrl-C or SIGTERM without losing a record.

While a job runs, the first SIGINT/SIGTERM is only noted: the controller stops the workers at its next
check, ships the whole spool, uploads the records and logs, and ends the run KILLED; then `Interrupted`
ends the command (and the sweep, whose parent run is ended KILLED too). A second signal interrupts at
once. `Interrupted` derives from KeyboardInterrupt so that it passes through Hydra's multirun loop, which
catches only `Exception`.
"""
from __future__ import annotations

import signal
from typing import Any

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


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

    for sig in STOP_SIGNALS:
        signal.signal(sig, interrupt)


class StopRequest:
    """While active: the first stop signal is noted in `signame` for the controller to act on at its next
    check; a second raises `Interrupted` at once."""

    def __init__(self) -> None:
        self.signame: str | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> "StopRequest":
        for sig in STOP_SIGNALS:
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
