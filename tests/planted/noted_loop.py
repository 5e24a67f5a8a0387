"""`NotedAdapter`: the baseline (adapters/baseline.py), taking free-text options it never reads. The secret tests put
token- and password-shaped values under these neutral keys of a job's config and prove none reaches MLflow or the
output; the bundled adapters refuse keys they do not read (`option_names`)."""
from __future__ import annotations

from evalkit.adapters.baseline import BaselineAdapter


class NotedAdapter(BaselineAdapter):
    option_names = ("note", "keys", "mirror", "mirror_password")
