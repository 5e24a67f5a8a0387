"""submitit's time-out signal on SLURM stops a job like SIGTERM does, and its run ends FAILED at SLURM's time limit."""
from __future__ import annotations

import signal

from evalkit.controller.interrupt import StopRequest, ended_status, interruption, stop_signals


def test_submitits_signal_is_a_stop_signal_on_slurm_only_and_named_as_the_time_limit(monkeypatch):
    monkeypatch.setenv("SUBMITIT_EXECUTOR", "slurm")
    assert signal.SIGUSR2 in stop_signals()
    assert interruption("SIGUSR2").startswith("stopped at SLURM's time limit (submitit's SIGUSR2")
    assert interruption("SIGTERM") == "interrupted by SIGTERM"
    assert ended_status("SIGUSR2") == "FAILED" and ended_status("SIGTERM") == "KILLED"      # a limit is a failure
    with StopRequest() as stop:
        signal.raise_signal(signal.SIGUSR2)
        assert stop.signame == "SIGUSR2"                   # noted: the controller stops the workers, keeps records
    monkeypatch.delenv("SUBMITIT_EXECUTOR")
    assert signal.SIGUSR2 not in stop_signals() and interruption("SIGUSR2") == "interrupted by SIGUSR2"
    assert ended_status("SIGUSR2") == "KILLED"
