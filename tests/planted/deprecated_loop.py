"""The hand-written loop calling a deprecated API of the fake wrapper `fakewrap` (tests/fakedist.py) after every
optimizer step (planted for tests/e2e/test_probe_maintenance.py; fakewrap's folder and tests/planted on PYTHONPATH)."""
from __future__ import annotations

import fakewrap

from evalkit.adapters.baseline import BaselineAdapter


class DeprecatedAdapter(BaselineAdapter):
    def after_optimizer_step(self, job, step, model):
        fakewrap.old_api()
        return False
