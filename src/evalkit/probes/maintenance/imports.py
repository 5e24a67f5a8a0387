"""Import cost: the seconds and resident memory that importing a wrapper adds, each repeat in a fresh process.

Every repeat is a new `python -c` child: the baseline modules (the core every arm pays, torch by default) are
imported first and not counted, then the measured modules are imported between two readings of the clock
(`time.perf_counter`) and of resident memory (`/proc/self/statm`; elsewhere `resource`'s peak RSS). Nothing is
imported in the parent, so no child starts warmer than a plain interpreter (bytecode caches and the OS file cache
are as Python and the machine normally have them). The child prints one JSON line, which the parent parses.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from dataclasses import asdict, dataclass, field

RESULT_MARK = "EVALKIT_IMPORT_COST "

CHILD = r"""
import importlib, json, os, sys, time

def rss():
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        import resource
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024

def load(names, stage):
    for name in names:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as e:
            return {"error": "missing", "stage": stage, "module": name, "missing": e.name or name}
        except BaseException as e:
            return {"error": "failed", "stage": stage, "module": name, "detail": f"{type(e).__name__}: {e}"[:500]}
    return None

spec = json.loads(sys.argv[1])
out = load(spec["baseline"], "baseline")
if out is None:
    before_modules, before = len(sys.modules), rss()
    t0 = time.perf_counter()
    out = load(spec["modules"], "modules")
    seconds = time.perf_counter() - t0
    if out is None:
        out = {"seconds": seconds, "rss_added": rss() - before, "modules_loaded": len(sys.modules) - before_modules}
print(MARK + json.dumps(out), flush=True)
"""


@dataclass
class ImportCost:
    modules: list[str]
    baseline_modules: list[str]
    seconds: list[float] = field(default_factory=list)        # per repeat
    mib_added: list[float] = field(default_factory=list)      # per repeat, resident memory
    modules_loaded: list[int] = field(default_factory=list)   # per repeat, new entries in sys.modules
    median_seconds: float | None = None
    median_mib_added: float | None = None
    error: str | None = None                                  # set when no repeat could be measured

    @property
    def ok(self) -> bool:
        return self.error is None

    def as_dict(self) -> dict:
        return asdict(self)


def import_cost(modules: list[str], repeats: int = 5, baseline_modules: tuple[str, ...] = ("torch",),
                python: str = sys.executable, timeout_s: float = 120, hint: str | None = None,
                extra_path: tuple[str, ...] = ()) -> ImportCost:
    """Import `modules` after `baseline_modules` in `repeats` fresh processes of `python`.

    A module that cannot be imported gives an ImportCost with `error` set (e.g. "no module named 'lightning':
    pip install -e '.[lightning]'", the text after the colon being `hint`), never an exception. `extra_path` is
    put in front of the child's PYTHONPATH.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    if not modules:
        raise ValueError("import_cost needs at least one module to import")
    result = ImportCost(list(modules), list(baseline_modules))
    spec = json.dumps({"modules": list(modules), "baseline": list(baseline_modules)})
    code = CHILD.replace("MARK", repr(RESULT_MARK))
    env = _child_env(extra_path)
    for _ in range(repeats):
        out, error = _run_child(python, code, spec, env, timeout_s)
        if error is None and "error" in out:
            error = _describe(out, hint)
        if error is not None:
            result.error = error
            break
        result.seconds.append(float(out["seconds"]))
        result.mib_added.append(out["rss_added"] / 2**20)
        result.modules_loaded.append(int(out["modules_loaded"]))
    if result.error is None:
        result.median_seconds = statistics.median(result.seconds)
        result.median_mib_added = statistics.median(result.mib_added)
    else:
        result.seconds, result.mib_added, result.modules_loaded = [], [], []
    return result


def _child_env(extra_path: tuple[str, ...]) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONWARNINGS"] = "ignore"
    for name in ("PYTHONSTARTUP", "PYTHONPROFILEIMPORTTIME", "PYTHONINSPECT"):
        env.pop(name, None)
    if extra_path:
        env["PYTHONPATH"] = os.pathsep.join([*extra_path, *filter(None, [env.get("PYTHONPATH")])])
    return env


def _run_child(python: str, code: str, spec: str, env: dict, timeout_s: float) -> tuple[dict, str | None]:
    try:
        proc = subprocess.run([python, "-c", code, spec], env=env, capture_output=True, text=True,
                              timeout=timeout_s, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return {}, f"importing timed out after {timeout_s:g} s"
    except OSError as e:
        return {}, f"could not start {python}: {e}"
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(RESULT_MARK):
            try:
                return json.loads(line[len(RESULT_MARK):]), None
            except json.JSONDecodeError:
                break
    tail = (proc.stderr or proc.stdout).strip()[-500:]
    return {}, f"the import child exited with code {proc.returncode} without a result: {tail}"


def _describe(out: dict, hint: str | None) -> str:
    stage = "baseline module" if out["stage"] == "baseline" else "module"
    if out["error"] == "missing":
        missing = out["missing"]
        text = f"no module named {missing!r}"
        if missing != out["module"]:
            text += f" (needed by {stage} {out['module']!r})"
        return f"{text}: {hint}" if hint else text
    text = f"importing {stage} {out['module']!r} failed: {out['detail']}"
    return f"{text}: {hint}" if hint else text
