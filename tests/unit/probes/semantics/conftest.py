"""The semantic judge's tests share the recorded baseline (tests/fixtures/semantics/baseline.json): read once per
module (`recorded`), and a copy a test may change (`jobs`)."""
from __future__ import annotations

import copy

import pytest
from helpers import FIXTURES

from evalkit.probes import evidence

FIXTURE = str(FIXTURES / "semantics" / "baseline.json")


@pytest.fixture(scope="module")
def recorded() -> dict[str, evidence.JobEvidence]:
    return {job.name: job for job in evidence.load_fixture(FIXTURE)}


@pytest.fixture
def jobs(recorded) -> dict[str, evidence.JobEvidence]:
    return copy.deepcopy(recorded)
