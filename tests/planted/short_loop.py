"""The baseline ending its fit early, each way a third party's adapter can (issue 48, tests/e2e/test_bad_inputs.py):
`ReturnsAtOnce` trains nothing, `StopsEarly` ends after step 3 without a word, `StopsEarlyDeclared` ends there
saying why (`ended_by`: FINISHED), `ExitsAtTwo` calls `sys.exit(0)` after step 2."""
from __future__ import annotations

import sys

from evalkit.adapters.baseline import BaselineAdapter


class ReturnsAtOnce(BaselineAdapter):
    def fit(self, job) -> None:
        return None


class StopsEarly(BaselineAdapter):
    def after_optimizer_step(self, job, step, model) -> bool:
        return step >= 3


class StopsEarlyDeclared(StopsEarly):
    ended_by = "its stop callback, asked for at step 3"


class ExitsAtTwo(BaselineAdapter):
    def after_optimizer_step(self, job, step, model) -> bool:
        if step >= 2:
            sys.exit(0)
        return False
