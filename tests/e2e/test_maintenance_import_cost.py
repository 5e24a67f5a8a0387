"""The maintenance probe's local measurements on a fake installed wrapper: its dependency closure and bounds on
torch/numpy, its import cost in fresh processes, and the deprecation warnings it raises."""
from __future__ import annotations

import json

from evalkit.probes.maintenance.imports import import_cost


# ------------------------------------------------------------------ import cost (fresh processes)
def test_import_cost_of_the_fake_wrapper(fake_site):
    cost = import_cost(["fakewrap"], repeats=2, baseline_modules=("json",), extra_path=(str(fake_site),))
    assert cost.error is None and cost.ok
    assert len(cost.seconds) == len(cost.mib_added) == 2 and all(s > 0 for s in cost.seconds)
    assert all(m >= 3.5 for m in cost.mib_added)                  # the 4 MiB the module writes at import
    assert all(n >= 1 for n in cost.modules_loaded)
    assert cost.median_seconds > 0 and cost.median_mib_added >= 3.5
    json.dumps(cost.as_dict())


def test_import_cost_says_what_is_missing_or_broken_without_raising(fake_site):
    missing = import_cost(["fakewrap_absent"], repeats=3, baseline_modules=(), hint="pip install -e '.[x]'")
    assert missing.error == "no module named 'fakewrap_absent': pip install -e '.[x]'"
    assert missing.seconds == [] and missing.median_seconds is None
    broken = import_cost(["fakebroken"], repeats=2, baseline_modules=(), extra_path=(str(fake_site),))
    assert "'fakebroken' failed: RuntimeError: fakebroken cannot start" in broken.error
    core = import_cost(["json"], repeats=1, baseline_modules=("nosuchcore",))
    assert core.error == "no module named 'nosuchcore'"
