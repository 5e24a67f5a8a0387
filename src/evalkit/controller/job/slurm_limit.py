"""Whether a SLURM job has reached its time limit: a job past `--time` (`hydra.launcher.timeout_min`) has its
processes signalled and then killed by SLURM, which the job's run would otherwise only call "killed by SIGKILL"."""
from __future__ import annotations

import os
import shutil
import subprocess
from typing import Callable, Mapping

GRACE_S = 30     # SLURM signals at the limit and kills KillWait seconds later (30 s by default)


def seconds(text: str) -> int | None:
    """SLURM's time format in seconds: `[days-]hours:minutes:seconds`, `minutes:seconds`; None for another."""
    days, _, clock = text.strip().rpartition("-")
    parts = clock.split(":")
    try:
        values = [int(p) for p in parts]
        total = int(days or 0) * 86400
    except ValueError:
        return None
    if not 1 <= len(values) <= 3:
        return None
    while len(values) < 3:
        values.insert(0, 0)
    return total + values[0] * 3600 + values[1] * 60 + values[2]


def time_limit_note(env: Mapping[str, str] = os.environ,
                    run: Callable[..., subprocess.CompletedProcess] = subprocess.run) -> str:
    """"SLURM's time limit of <limit> was reached (...)" when this process's SLURM job has used its time limit (within
    GRACE_S), else "" (not a SLURM job, no squeue, an unlimited job, or time left)."""
    job = env.get("SLURM_JOB_ID")
    if not job or shutil.which("squeue") is None:
        return ""
    try:
        out = run(["squeue", "-h", "-j", job, "-o", "%l|%M"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    limit_text, _, used_text = out.strip().partition("|")
    limit, used = seconds(limit_text), seconds(used_text)
    if limit is None or used is None or used < limit - GRACE_S:
        return ""
    return (f"SLURM's time limit of {limit_text} was reached (SLURM job {job}: hydra.launcher.timeout_min, "
            "sbatch --time)")
