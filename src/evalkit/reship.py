"""`evalkit-ship RUN_DIR`: record a job whose tracking store failed, from the spool it left on disk.

Points already in MLflow (through the last step of `train/loss` there) are not sent twice.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from omegaconf import OmegaConf

from evalkit.job import EXIT_CODES_FILE, RUN_FILE, Controller
from evalkit.ship import Shipper
from evalkit.tracking import TrackingUnavailable
from evalkit.worker import JOB_FILE


def reship(run_dir: str, uri: str | None = None) -> bool:
    for name in (JOB_FILE, RUN_FILE):
        if not os.path.exists(os.path.join(run_dir, name)):
            raise FileNotFoundError(f"{run_dir} has no {name}: it is not an evalkit run directory")
    with open(os.path.join(run_dir, JOB_FILE)) as fh:
        spec = json.load(fh)
    with open(os.path.join(run_dir, RUN_FILE)) as fh:
        run = json.load(fh)
    codes_path = os.path.join(run_dir, EXIT_CODES_FILE)
    codes = json.load(open(codes_path)) if os.path.exists(codes_path) else [1]   # interrupted before the end
    cfg = OmegaConf.create(spec["config"])
    ctl = Controller(cfg, run_dir, uri=uri or run["tracking_uri"], run_id=run["run_id"])
    history = ctl.client.get_metric_history(ctl.run_id, "train/loss")
    shipper = Shipper(ctl.client, ctl.run_id, spec["spool_dir"], cfg.distributed.world_size,
                      cfg.tracking.batch_size, shipped_through=max((m.step for m in history), default=0))
    return ctl.ship_and_finish(shipper, codes).ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("run_dir", help="the job's output directory (it holds job.json, run.json and spool/)")
    parser.add_argument("--tracking-uri", help="record into this store instead of the one the job used")
    args = parser.parse_args()
    try:
        ok = reship(os.path.abspath(args.run_dir), args.tracking_uri)
    except (FileNotFoundError, TrackingUnavailable) as exc:
        print(f"evalkit-ship: {exc}", file=sys.stderr)
        sys.exit(2)
    print(f"evalkit-ship: recorded {args.run_dir} ({'FINISHED' if ok else 'FAILED'})")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
