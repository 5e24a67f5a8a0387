"""A folder named `adapters/` in the working directory cannot shadow evalkit's bundled adapters (issue 45): a user's
project may have one, and `python -m evalkit.worker` started in that directory would import it. The adapters install
as `evalkit.adapters` (setup.py), so `import adapters` means nothing of evalkit's; the worker and the warm server
also move the working directory last on sys.path, and the user's own modules there still import."""
from __future__ import annotations

import subprocess
import sys

from helpers import job_runs, run_evalkit

TINY = ["task.n_train=64", "task.n_val=32", "train.batch_size=8", "train.val_every=0", "train.max_steps=4"]
HOSTILE = 'raise ImportError("the working directory\'s adapters/ was imported instead of evalkit\'s")\n'


def test_the_baseline_and_a_wrapper_train_beside_a_hostile_adapters_folder(workdir):
    hostile = workdir / "adapters"
    (hostile / "custom").mkdir(parents=True)
    for name in ("__init__.py", "baseline.py", "ignite_engine.py", "custom/__init__.py"):
        (hostile / name).write_text(HOSTILE)
    proc = run_evalkit(workdir, "trainer=baseline,ignite", *TINY, multirun=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    _, runs = job_runs(workdir)
    jobs = [r for r in runs if r.data.tags.get("evalkit.role") == "job"]
    assert sorted(r.data.tags["evalkit.trainer"] for r in jobs) == ["baseline", "ignite"]
    assert all(r.info.status == "FINISHED" for r in jobs), [r.data.tags.get("evalkit.failure_reason") for r in jobs]


def test_import_adapters_means_nothing_of_evalkits(tmp_path):
    found = subprocess.run([sys.executable, "-c", "import importlib.util as u; print(u.find_spec('adapters'), "
                            "u.find_spec('evalkit.adapters.baseline').origin)"],
                           cwd=tmp_path, capture_output=True, text=True, check=True).stdout.split()
    assert found[0] == "None" and found[1].endswith("adapters/baseline.py"), found
