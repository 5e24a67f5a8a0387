"""The maintenance probe's plan: one standard run (the functional probe's caliber, one process) that records its
deprecation warnings; the installed environment is measured beside it (measure.py)."""
from __future__ import annotations

TASK = "mlp_regression"
STANDARD_RUN = "standard"      # the standard run's job name: the judge reads its deprecation warnings
