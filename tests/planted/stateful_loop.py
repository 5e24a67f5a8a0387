"""The baseline loop that leaves state behind in its process (planted for tests/smoke/test_warm_start.py; importable
with tests/planted on PYTHONPATH): a module global it sets when its job trains, and a job that finds it already
set fails ("state carried from an earlier job"). Two jobs forked one after the other from the same warm server
(`evalkit.worker.warm_server`) must both pass: each child starts from the server's state, which never trained. And, as
the transformers adapter does with HF_HUB_OFFLINE, the module sets an environment variable as it is imported: a job
that does not see it fails (a forked worker must keep what its module's import did, as a fresh interpreter would)."""
from __future__ import annotations

import os

from evalkit.adapters.baseline import BaselineAdapter
from evalkit.contract import TrainJob

TRAINED_HERE: list[int] = []      # the seeds of the jobs this process trained
IMPORTED = "EVALKIT_PLANTED_SET_AT_IMPORT"
os.environ[IMPORTED] = "1"


class StatefulAdapter(BaselineAdapter):
    def fit(self, job: TrainJob) -> None:
        if os.environ.get(IMPORTED) != "1":
            raise RuntimeError(f"{IMPORTED}, set as this module was imported, is gone from the worker's environment")
        if TRAINED_HERE:
            raise RuntimeError(f"state carried from an earlier job: this process already trained seed {TRAINED_HERE}")
        TRAINED_HERE.append(job.seed)
        super().fit(job)
