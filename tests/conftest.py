"""Fixtures and the environment every test runs in; the shared helpers live in helpers.py."""
from __future__ import annotations

import os

import pytest

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")


@pytest.fixture
def workdir(tmp_path):
    return tmp_path
