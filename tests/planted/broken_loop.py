"""The hand-written loop crashing before its first step (planted for tests/e2e/test_probe_maintenance.py: a
maintenance run whose standard run fails, with no import figure and no release history, has nothing to pass on;
importable with tests/planted on PYTHONPATH)."""
from __future__ import annotations

from evalkit.adapters.baseline import BaselineAdapter
from evalkit.contract import TrainJob


class BrokenAdapter(BaselineAdapter):
    def fit(self, job: TrainJob) -> None:
        raise RuntimeError("planted: the wrapper crashes before its first step")
