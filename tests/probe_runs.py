"""The probes' runs of the e2e tier and their recordings (issue 27): each probe's planted and correct variants
(PROBE_RUNS), how to run them live, the recorded evidence in tests/fixtures/<dim>/ and its judging, a fake package
index for the maintenance probe."""
from __future__ import annotations

import importlib
import os
import subprocess
from pathlib import Path

from helpers import FIXTURES, PLANTED, closed_port, ok, run_evalkit

# ================================================================== the other probes' runs and their recordings
# (issue 27; this section ends the file.) Every probe run tests/e2e/test_probe_<dim>.py trains for consistency,
# customization, stability, functional, maintenance and performance: PROBE_RUNS[dim][name] is its overrides after
# `probe=<dim>`. The e2e module trains each live with `run_probe_variant`, scripts/record_probe_fixtures.py
# records each one's stored evidence with the same call into tests/fixtures/<dim>/<name>.json.gz (and what the
# probe measured, <name>.measured.json.gz), and tests/unit/probes/<dim>/test_judge_recorded.py judges the
# recordings (`judged_recording`): the live run and its recording cannot drift apart.
PLANTED_LOOP = ["trainer._target_=planted_loop.PlantedAdapter", "trainer.name=planted"]
CONSISTENCY_RUNS = {"baseline": ["trainer=baseline", "probe.seeds=2"],     # two seeds per arm keep it short
                    "planted": [*PLANTED_LOOP, "+trainer.options.wrong=unexplained", "probe.seeds=2"]}
PLANTED_CUSTOM = ["trainer=baseline", "trainer.name=planted_custom"]     # tests/planted/custom_loop.py's classes
CUSTOMIZATION_RUNS = {
    "baseline": ["trainer=baseline"],
    "planted_a": PLANTED_CUSTOM + ["trainer.customizations.loss=custom_loop.IgnoredLoss",
                                   "trainer.customizations.callback=custom_loop.SilentCallback"],
    "planted_b": PLANTED_CUSTOM + ["trainer.customizations.loss=custom_loop.WrongWeightLoss",
                                   "trainer.customizations.callback=custom_loop.PerMicroBatchCallback"],
}
UNSTABLE = ["trainer._target_=unstable_loop.UnstableAdapter", "trainer.name=unstable", "probe.world_sizes=[1]"]
STABILITY_RUNS = {
    "baseline": ["trainer=baseline", "probe.long_steps=300"],
    "planted_a": UNSTABLE + [
        "+trainer.options.resume_wrongs={kill_between:no_rng,kill_after_ckpt:no_optimizer,kill_in_save:data_restart}",
        "+trainer.options.fresh_on_corrupt=true", "+trainer.options.swallow_oom=true", "+trainer.options.leak_kb=300",
        "probe.only=[kill_between,kill_after_checkpoint,kill_during_write,corrupt_truncated,out_of_memory,long_run]",
        "probe.long_steps=300"],
    "planted_b": UNSTABLE + [
        "+trainer.options.resume_wrongs={kill_between:no_scheduler,kill_after_ckpt:repeat_step}",
        "+trainer.options.in_place=true",
        "probe.only=[kill_between,kill_after_checkpoint,kill_during_write,corrupt_flipped]"],
    # tests/planted/quiet_loop.py (issue 28): not reproducible AND its data position lost on resume; a crash for an
    # unrelated reason on every resume of a checkpoint copy; errors caught and sys.exit(0); a leak of about 4x the
    # baseline's RSS slope over 3,000 steps (about 0.18 KiB a step; at 300 steps a leak that small hides in the
    # allocator's free memory: the two long runs take about 40 s)
    "planted_c": ["trainer._target_=quiet_loop.QuietAdapter", "trainer.name=quiet", "probe.world_sizes=[1]",
                  "+trainer.options.jitter=0.0001", "+trainer.options.resume_wrongs={kill_between:data_restart}",
                  "+trainer.options.unrelated_crash_on=[intact,truncated]", "+trainer.options.exit_on_error=true",
                  "+trainer.options.leak_bytes=560",
                  "probe.only=[kill_between,corrupt_truncated,out_of_memory,loss_error,long_run]",
                  "probe.long_steps=3000"],
}
# The baseline's loop under a name of its own: the verdict has no row for the baseline (every row's reference).
# tests/planted/swap_loop.py: fp16_mixed on CPU refused as a silent substitution (aligned) or run as fp32 (defaults).
SWAP = ["trainer=baseline", "trainer._target_=swap_loop.PrecisionSwapAdapter", "trainer.name=swap"]
FUNCTIONAL_RUNS = {"handwritten": ["trainer=baseline", "trainer.name=handwritten"],
                   "swap_aligned": SWAP + ["trainer.mode=aligned"], "swap_defaults": SWAP + ["trainer.mode=defaults"]}
# A planted trainer whose wrapper is tests/fakedist.py's `fakewrap` (its site first on PYTHONPATH), its release
# history from FAKEWRAP_INDEX served by `fake_index`: online, then offline from the cache the online run wrote,
# then unreachable with an empty cache (`maintenance_index`: the index and the cache of each).
DEPRECATED = ["trainer=baseline", "trainer.name=deprecated", "trainer._target_=deprecated_loop.DeprecatedAdapter",
              "trainer.requirements=[fakewrap]", "trainer.modules=[fakewrap]",
              "probe.maintenance.import_repeats=1", "probe.maintenance.max_deprecations=0",
              "probe.maintenance.candidates=[]"]
# nothing: tests/planted/broken_loop.py (its standard run crashes) as fakewrap's leaf dependency `fake-leaf` (whose
# requirements the installed torch meets), no module to import, the index unreachable with an empty cache: nothing
# measured that a pass could rest on but its dependencies (issue 28).
BROKEN = ["trainer=baseline", "trainer.name=broken", "trainer._target_=broken_loop.BrokenAdapter",
          "trainer.requirements=[fake-leaf]", "trainer.modules=[]", "probe.maintenance.import_repeats=1",
          "probe.maintenance.candidates=[]"]
MAINTENANCE_RUNS = {"online": DEPRECATED, "offline": DEPRECATED + ["probe.maintenance.offline=true"],
                    "unreachable": DEPRECATED, "nothing": BROKEN}
# tests/planted/slow_loop.py: 30 % slower per step, then identical, then a helper thread working 3 ms of CPU every
# 10 ms beside training (work off the main thread: the wrapper's cost, issue 44), the probe at its settings but a time
# limit that leaves the identical copy room to decide (scripts/bench_performance_probe.py: the margins these outcomes
# rest on).
SLOW = ["trainer._target_=slow_loop.SlowBaselineAdapter", "trainer.name=slow", "probe.performance.time_limit_s=60"]
PERFORMANCE_RUNS = {"slow": SLOW + ["+trainer.options.slower=0.3"], "identical": SLOW + ["+trainer.options.slower=0.0"],
                    "helper": SLOW + ["+trainer.options.helper=0.3"]}
PERFORMANCE_OUTCOMES = {"slow": "fail", "identical": "pass", "helper": "fail"}
VARIANTS = Path(__file__).parent / "probe_variants"


def declared_runs() -> dict[str, object]:
    """The runs a probe added by the recipe declares in tests/probe_variants/<dim>.py, the module by probe: `RUNS`
    (name -> overrides after `probe=<dim>`), optionally `OUTCOMES` (name -> pass | fail | inconclusive) and
    `UNPLANTED` (the names that need no tests/planted on PYTHONPATH)."""
    return {path.stem: importlib.import_module(f"probe_variants.{path.stem}")
            for path in sorted(VARIANTS.glob("*.py")) if path.stem != "__init__"}


DECLARED = declared_runs()
PROBE_RUNS = {"consistency": CONSISTENCY_RUNS, "customization": CUSTOMIZATION_RUNS, "stability": STABILITY_RUNS,
              "functional": FUNCTIONAL_RUNS, "maintenance": MAINTENANCE_RUNS, "performance": PERFORMANCE_RUNS,
              **{dim: module.RUNS for dim, module in DECLARED.items()}}
UNPLANTED_RUNS = {("consistency", "baseline"), ("functional", "handwritten"),   # no tests/planted on PYTHONPATH
                  *((dim, name) for dim, module in DECLARED.items() for name in getattr(module, "UNPLANTED", ()))}
FAKEWRAP_INDEX = {"info": {"version": "1.2.0", "requires_dist": []},
                  "releases": {v: [{"upload_time_iso_8601": f"{day}T00:00:00Z", "yanked": False}] for v, day in
                               (("0.9.0", "2026-01-05"), ("1.0.0", "2026-03-01"), ("1.1.0", "2026-06-01"),
                                ("1.2.0", "2026-09-01"))}}


def probe_run_env(dim: str, name: str, site: str | Path | None = None) -> dict:
    """The environment of PROBE_RUNS[dim][name]: tests/planted (after `site`, a fake wrapper's) on PYTHONPATH."""
    if (dim, name) in UNPLANTED_RUNS:
        return {}
    path = [str(site) if site else None, str(PLANTED), os.environ.get("PYTHONPATH")]
    return {"PYTHONPATH": os.pathsep.join(p for p in path if p)}


def run_probe_variant(workdir, dim: str, name: str, *extra: str, site: str | Path | None = None,
                      timeout: float = 600) -> subprocess.CompletedProcess:
    """`evalkit probe=<dim> PROBE_RUNS[dim][name] [extra]` in `workdir` (its store workdir/mlflow.db)."""
    return run_evalkit(workdir, f"probe={dim}", *PROBE_RUNS[dim][name], *extra, timeout=timeout,
                       env=probe_run_env(dim, name, site))


def run_probe_variants_side_by_side(tmp_path_factory, dim: str) -> dict[str, Path]:
    """Every PROBE_RUNS[dim] at once, each in a store of its own (`run_probe_variant`), each required to succeed:
    {name: its workdir}."""
    from concurrent.futures import ThreadPoolExecutor

    dirs = {name: tmp_path_factory.mktemp(name) for name in PROBE_RUNS[dim]}
    with ThreadPoolExecutor(len(dirs)) as pool:
        procs = {name: pool.submit(run_probe_variant, dirs[name], dim, name) for name in dirs}
        for proc in procs.values():
            ok(proc.result())
    return dirs


def maintenance_index(index_url: str, cache: str | Path, empty_cache: str | Path) -> dict[str, list[str]]:
    """Each maintenance run's index and cache, run in MAINTENANCE_RUNS' order: online from `index_url` (a
    FakeIndex) into `cache`, offline from that cache, unreachable and nothing (nothing listens) with `empty_cache`."""
    where = {"online": (index_url, cache), "offline": (index_url, cache),
             "unreachable": (f"http://127.0.0.1:{closed_port()}/pypi", empty_cache),
             "nothing": (f"http://127.0.0.1:{closed_port()}/pypi", empty_cache)}
    return {name: [f"probe.maintenance.index_url={url}", f"probe.maintenance.cache_dir={folder}"]
            for name, (url, folder) in where.items()}


class FakeIndex:
    """A package index on 127.0.0.1 that serves FAKEWRAP_INDEX at /fakewrap/json (404 elsewhere), in a thread:
    `with FakeIndex() as index:` gives `index.url` and `index.hits`, the paths it was asked for, in order."""

    def __init__(self):
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        hits: list[str] = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                import json

                hits.append(self.path)
                found = self.path == "/fakewrap/json"
                body = json.dumps(FAKEWRAP_INDEX).encode() if found else b"{}"
                self.send_response(200 if found else 404)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.hits, self.server = hits, ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> "FakeIndex":
        import threading

        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def recording(dim: str, name: str, folder: Path | None = None) -> tuple[list, dict | None]:
    """(the jobs, what the probe measured or None) recorded for PROBE_RUNS[dim][name] in tests/fixtures/<dim>/
    (or `folder`). A parameter vector the recording holds as "=<job>/<step>" is the one of that job and step stored
    before it (scripts/record_probe_fixtures.py stores each distinct vector once: resumes repeat their reference's)."""
    import gzip
    import json

    from evalkit.probes.evidence import JobEvidence

    folder = FIXTURES / dim if folder is None else folder
    with gzip.open(folder / f"{name}.json.gz", "rt") as fh:
        jobs = expand_params(json.load(fh))
    path, measured = folder / f"{name}.measured.json.gz", None
    if path.exists():
        with gzip.open(path, "rt") as fh:
            measured = json.load(fh)
    return [JobEvidence.from_json(json.dumps(job)) for job in jobs], measured


def expand_params(jobs: list[dict]) -> list[dict]:
    """Recorded jobs (evidence.save_fixture's JSON, parsed) with each "=<job>/<step>" parameter vector replaced by
    the one it names."""
    stored: dict[str, list] = {}
    for job in jobs:
        for step, values in job["params"].items():
            if isinstance(values, str):
                job["params"][step] = stored[values.removeprefix("=")]
            stored.setdefault(f"{job['name']}/{step}", job["params"][step])
    return jobs


def judged_recording(dim: str, name: str, folder: Path | None = None) -> dict:
    """The probe's judge on the recording of PROBE_RUNS[dim][name] (in tests/fixtures/<dim>/ or `folder`): its
    result as `probe/<dim>.json` holds it."""
    import json

    from evalkit.probes.catalog import load_probe

    jobs, measured = recording(dim, name, folder)
    if dim == "stability":    # its probe object keeps the limits of the last config it planned: the defaults here
        from evalkit.probes.stability.judge import judge

        return json.loads(judge(jobs).to_json())
    probe = load_probe(dim)
    return json.loads((probe.judge(jobs) if measured is None else probe.judge(jobs, measured)).to_json())


def result_shape(result: dict, *exact: str) -> dict:
    """What a live run and its recording must share: the status, each finding's code and first step, the names
    of the figures (not their values: a performance probe's timings, a maintenance probe's import seconds), and
    the values of the `exact` figures (counts, steps)."""
    status = "inconclusive" if result["inconclusive"] else "pass" if result["passed"] else "fail"
    findings = sorted(((f["code"], f["first_step"]) for f in result["findings"]),
                      key=lambda found: (found[0], found[1] is not None, found[1] or 0))
    return {"status": status, "findings": findings, "figures": sorted(result["figures"]),
            **{f"figure {k}": result["figures"].get(k) for k in exact}}


def rerecord(dim: str) -> str:
    return (f"the {dim} probe's recording no longer matches a live run: if what a job records changed, run "
            f"python scripts/record_probe_fixtures.py --probe {dim}")


def verdict_cell(dim: str, result: dict, trainer: str):
    """The verdict's `dim` cell (a DimensionResult) for a probe run logged as the probe runner logs `result`
    (probe/<dim>/pass unless inconclusive, each figure, the status, headline and reason tags), alone in a store."""
    import json

    from evalkit import names
    from evalkit.analysis.records import RunRecord
    from evalkit.probes.findings import ProbeResult
    from evalkit.verdict import VerdictOptions, build_verdict

    parsed = ProbeResult.from_json(json.dumps(result))
    metrics = {} if parsed.inconclusive else {names.probe_pass(dim): float(parsed.passed)}
    metrics.update({f"probe/{dim}/{k}": float(v) for k, v in parsed.figures.items() if v is not None})
    tags = {names.ROLE: names.ROLE_PROBE, names.PROBE: dim, names.TRAINER: trainer, names.MODE: "aligned",
            names.TASK: "mlp_regression", names.CALIBER: f"{dim}|recorded", names.probe_status(dim): parsed.status}
    tags.update({k: v for k, v in ((names.probe_headline(dim), parsed.headline),
                                   (names.probe_reason(dim), parsed.reason)) if v})
    (row,) = build_verdict([RunRecord("recorded", "FINISHED", tags, metrics, probe_results={dim: result})],
                           VerdictOptions()).rows
    assert row.key.trainer == trainer
    return row.dimensions[dim]


def probe_status(result: dict) -> str:
    """pass | fail | inconclusive of a probe's stored result."""
    return "inconclusive" if result["inconclusive"] else "pass" if result["passed"] else "fail"
