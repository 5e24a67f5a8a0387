"""A run directory held by a live job is refused with advice that fits who asks (issue 48): another job is told to
take a directory of its own; evalkit-ship is told the job records itself, never to set hydra.run.dir."""
from __future__ import annotations

import os

import pytest

from evalkit.controller.job import rundir


def test_evalkit_ship_on_a_running_job_is_told_to_wait_not_to_move(tmp_path):
    held = rundir.claim(str(tmp_path / "run"))
    try:
        with pytest.raises(rundir.RunDirBusy) as ship:
            rundir.claim(str(tmp_path / "run"), what="evalkit-ship")
        with pytest.raises(rundir.RunDirBusy) as job:
            rundir.claim(str(tmp_path / "run"))
    finally:
        held.release()
    assert str(ship.value) == (f"run directory {tmp_path / 'run'} belongs to an evalkit job that is still running "
                               f"(pid {os.getpid()}): it records itself; run evalkit-ship there after it has stopped "
                               "(killed, or told to by its own message)")
    assert "hydra.run.dir" not in str(ship.value) and "hydra.run.dir=..." in str(job.value)
    rundir.claim(str(tmp_path / "run"), what="evalkit-ship").release()      # free again once released
