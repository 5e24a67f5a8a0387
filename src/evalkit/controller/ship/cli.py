"""`evalkit-ship RUN_DIR`: record a job whose tracking store failed, from the spool it left on disk
(`controller/job/ship.py`). `evalkit-ship SWEEP_DIR`: the same for every job of a sweep that did not end, then its
parent run (`controller/ship/sweep.py`).
"""
from __future__ import annotations

import argparse
import os
import sys

from evalkit import names
from evalkit.controller.job import rundir
from evalkit.controller.job.ship import ALREADY_ENDED, reship
from evalkit.controller.launch_dir import cwd_problem
from evalkit.controller.ship.sweep import finish_sweeps, is_sweep_dir
from evalkit.controller.tracking import TrackingUnavailable


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("run_dir", help="the job's output directory (it holds job.json, run.json and spool/), or a "
                                        "sweep's (hydra.sweep.dir): its jobs that did not end, then its parent run")
    parser.add_argument("--tracking-uri", help="record into this store instead of the one the job used")
    args = parser.parse_args()
    problem = cwd_problem() if not os.path.isabs(args.run_dir) else None
    if problem:
        print(f"evalkit-ship: {problem}", file=sys.stderr)
        sys.exit(2)
    run_dir = os.path.abspath(args.run_dir)
    try:
        if not os.path.exists(os.path.join(run_dir, names.JOB_FILE)) and is_sweep_dir(run_dir):
            sys.exit(0 if finish_sweeps(run_dir, args.tracking_uri) else 1)
        result = reship(run_dir, args.tracking_uri)
    except (FileNotFoundError, TrackingUnavailable, rundir.RunDirBusy) as exc:
        print(f"evalkit-ship: {exc}", file=sys.stderr)
        sys.exit(2)
    if result.reason == ALREADY_ENDED:     # shipping does nothing twice
        print(f"evalkit-ship: run {result.run_id} of {args.run_dir} has already ended ({result.status}): left as it is")
        sys.exit(0)
    print(f"evalkit-ship: recorded {args.run_dir} (run {result.run_id} {result.status}"
          f"{': ' + result.reason if result.reason else ''})")
    sys.exit(0 if result.ok else 1)


if __name__ == "__main__":
    main()
