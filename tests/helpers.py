"""Shared test helpers: run the real `evalkit` command in a temporary directory, read the real MLflow store.

Tests import them with `from helpers import ...` (tests/ is on sys.path: it has no __init__.py); fixtures
and the environment set-up stay in conftest.py."""
from __future__ import annotations

import csv
import os
import re
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent          # tests/: helpers.py, planted/, fixtures/
REPO = TESTS.parent                              # the checkout
CONF = REPO / "conf"
PLANTED = TESTS / "planted"                      # wrong loops planted on purpose (tests/planted/README.md)
FIXTURES = TESTS / "fixtures"                    # recorded evidence (scripts/record_probe_fixtures.py)
_SCRIPT = os.path.join(os.path.dirname(sys.executable), "evalkit")
# The console script of an installed evalkit; without one (a GPU machine running from PYTHONPATH, see
# scripts/cuda_check.sh) the same entry point through the interpreter.
EVALKIT = [_SCRIPT] if os.path.exists(_SCRIPT) else [sys.executable, "-m", "evalkit"]


def run_evalkit(workdir, *overrides: str, multirun: bool = False, timeout: float = 600,
                env: dict | None = None) -> subprocess.CompletedProcess:
    """Run `evalkit [overrides]` in `workdir` (its local store is workdir/mlflow.db)."""
    full_env = {k: v for k, v in os.environ.items()
                if k not in ("MLFLOW_TRACKING_URI", "EVALKIT_DEFAULT_TRACKING_URI")}
    full_env.update(env or {})
    cmd = [*EVALKIT, *(["-m"] if multirun else []), *overrides, "tracking.progress_interval_s=1000"]
    return subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=timeout, env=full_env)


def compose_config(*overrides: str, hydra: bool = False):
    """The job config `evalkit [overrides]` composes, in this process (with Hydra's own node when `hydra`)."""
    from hydra import compose, initialize_config_module

    from evalkit.config import register_configs

    register_configs()
    with initialize_config_module("evalkit.conf", version_base=None):
        return compose("config", overrides=list(overrides), return_hydra_config=hydra)


def numeric_settings(schema: type, prefix: str = "") -> list[str]:
    """The keys of a schema's numeric settings (a number, a list of numbers, nullable or not), nested ones too."""
    import dataclasses
    import typing

    out = []
    for name, kind in typing.get_type_hints(schema).items():
        if dataclasses.is_dataclass(kind):
            out += numeric_settings(kind, f"{prefix}{name}.")
        elif kind in (int, float, typing.Optional[int], typing.Optional[float], list[float], list[int]):
            out.append(f"{prefix}{name}")
    return out


def store_uri(workdir) -> str:
    return f"sqlite:///{os.path.abspath(os.path.join(workdir, 'mlflow.db'))}"


def job_runs(workdir, experiment: str = "evalkit"):
    """Every run of the experiment, oldest first."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(store_uri(workdir))
    exp = client.get_experiment_by_name(experiment)
    runs = client.search_runs([exp.experiment_id], max_results=1000, order_by=["attributes.start_time ASC"])
    return client, runs


def job_summary(client, run) -> dict:
    """A job's `evalkit/summary_rank0.json` (rank 0's start-up milestones, threads, import footprint, ...)."""
    import json

    with open(client.download_artifacts(run.info.run_id, "evalkit/summary_rank0.json")) as fh:
        return json.load(fh)


def probe_result(workdir, dimension: str):
    """The store's one probe run and its `probe/<dimension>.json`: (client, run, result)."""
    import json

    from mlflow.tracking import MlflowClient

    from evalkit import names

    client = MlflowClient(store_uri(workdir))
    exp = client.get_experiment_by_name("evalkit").experiment_id
    (run,) = client.search_runs([exp], f"tags.`{names.ROLE}` = 'probe'")
    with open(client.download_artifacts(run.info.run_id, f"probe/{dimension}.json")) as fh:
        return client, run, json.load(fh)


def read_records(client, run_id: str, name: str = "steps_rank0.csv") -> list[dict]:
    path = client.download_artifacts(run_id, f"records/{name}")
    with open(path) as fh:
        return list(csv.DictReader(fh))


def bundled_task_arguments(name: str) -> dict:
    """The keyword arguments the worker gives the builder of bundled task `name`: its YAML through its schema."""
    from omegaconf import OmegaConf

    from evalkit.tasks.schemas import BUNDLED, builder_arguments

    written = OmegaConf.load(CONF / "task" / f"{name}.yaml")
    written.pop("defaults")
    return builder_arguments(OmegaConf.merge(OmegaConf.structured(BUNDLED[name]), written))


def ok(proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 0, proc.stderr[-4000:]


def run_ok(workdir, *overrides: str):
    """Run evalkit, require success, return (client, the newest run)."""
    ok(run_evalkit(workdir, *overrides))
    client, runs = job_runs(workdir)
    return client, runs[-1]


def effective_config(client, run) -> dict:
    import json

    with open(client.download_artifacts(run.info.run_id, "evalkit/effective_config.json")) as fh:
        return json.load(fh)


def assert_bit_identical_to_baseline(client, wrapper, baseline, steps: int, val_steps: list[str]) -> None:
    """Aligned mode, fp32, one process: loss (within 1e-6 relative, and in fact to the last bit: the CSV
    holds repr-exact floats), LR, grad norm, micro-batches and validation equal the baseline's."""
    ours, theirs = read_records(client, wrapper.info.run_id), read_records(client, baseline.info.run_id)
    assert [r["step"] for r in ours] == [r["step"] for r in theirs] == [str(s) for s in range(1, steps + 1)]
    worst = max(abs(float(a["loss"]) - float(b["loss"])) / abs(float(b["loss"])) for a, b in zip(ours, theirs))
    assert worst <= 1e-6
    for a, b in zip(ours, theirs):
        assert (a["loss"], a["lr"], a["grad_norm"], a["micro_batches"]) == \
               (b["loss"], b["lr"], b["grad_norm"], b["micro_batches"]), a["step"]

    def val(run):
        return [(r["step"], r["mse"]) for r in read_records(client, run.info.run_id, "val_rank0.csv")]

    assert val(wrapper) == val(baseline) and [s for s, _ in val(wrapper)] == val_steps


# Shared settings of the adapter tests: 50 steps on a small split; resume runs stop at 40 on 2 ranks.
ADAPTER_SMALL = ["task.n_train=512", "task.n_val=128", "train.max_steps=50", "train.val_every=25"]
ADAPTER_RESUME = ["task.n_train=512", "task.n_val=128", "train.max_steps=40", "train.val_every=25",
                  "distributed=ddp", "distributed.world_size=2"]


def aligned_with_baseline(workdir, *trainer: str):
    """The wrapper, then the baseline, with ADAPTER_SMALL in one workdir: (client, wrapper, baseline)."""
    client, wrapper = run_ok(workdir, *trainer, *ADAPTER_SMALL)
    _, baseline = run_ok(workdir, "trainer=baseline", *ADAPTER_SMALL)
    return client, wrapper, baseline


SHARED_SWEEP = ["seed=0,1", *ADAPTER_SMALL, "tracking.system_metrics_interval_s=0.5"]


class SharedSweep:
    """The session's shared store (conftest's `shared_sweep`): the baseline and every installed wrapper, aligned
    fp32 on ADAPTER_SMALL at seeds 0 and 1 (SHARED_SWEEP), one `evalkit -m` into `folder`/mlflow.db, then
    `evalkit-verdict` on it (its report in `folder`/report). Read it, never write to it."""

    def __init__(self, folder: Path):
        import json

        self.folder = folder
        done = json.loads((folder / "sweep.json").read_text())
        self.trainers, self.returncode, self.stderr = done["trainers"], done["returncode"], done["stderr"]
        self.verdict_returncode, self.verdict_stderr = done["verdict_returncode"], done["verdict_stderr"]

    def jobs(self) -> tuple:
        """(client, every job run, oldest first); fails with the sweep's own error output if the sweep failed."""
        assert self.returncode == 0, self.stderr[-4000:]
        client, runs = job_runs(self.folder)
        jobs = [r for r in runs if r.data.tags.get("evalkit.role") == "job"]
        assert sorted({r.data.tags["evalkit.trainer"] for r in jobs}) == sorted(self.trainers), self.trainers
        return client, jobs

    def runs(self) -> tuple:
        """(client, {trainer: its seed-0 job run})."""
        client, jobs = self.jobs()
        return client, {r.data.tags["evalkit.trainer"]: r for r in jobs if r.data.tags["evalkit.seed"] == "0"}

    def aligned(self, trainer: str) -> tuple:
        """(client, the wrapper's run, the baseline's run): what `aligned_with_baseline` runs, read from here."""
        client, jobs = self.runs()
        return client, jobs[trainer], jobs["baseline"]

    def verdict(self) -> tuple:
        """(client, the sweep's parent run, its verdict run), re-read from the store."""
        assert self.verdict_returncode == 0, self.verdict_stderr[-4000:]
        client, runs = job_runs(self.folder)
        (parent,) = [r for r in runs if r.data.tags.get("evalkit.role") == "sweep"]
        (verdict,) = [r for r in runs if r.data.tags.get("evalkit.role") == "verdict"]
        return client, parent, verdict


def shared_sweep_in(folder: Path) -> SharedSweep:
    """The shared sweep in `folder`, built there unless a process of this session already has (an exclusive lock
    beside it: pytest-xdist's workers wait for the one that builds it)."""
    import fcntl
    import json

    from evalkit.trainers import installed_trainers

    folder.mkdir(parents=True, exist_ok=True)
    with open(folder.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / "sweep.json").exists():
            trainers = installed_trainers()[0]
            proc = run_evalkit(folder, f"trainer={','.join(trainers)}", *SHARED_SWEEP, multirun=True, timeout=1500)
            verdict = _verdict_of(folder) if proc.returncode == 0 else None
            (folder / "sweep.json").write_text(json.dumps(
                {"trainers": trainers, "returncode": proc.returncode, "stderr": proc.stderr,
                 "verdict_returncode": verdict.returncode if verdict else None,
                 "verdict_stderr": verdict.stderr if verdict else "the sweep failed: no verdict"}))
    return SharedSweep(folder)


def _verdict_of(folder: Path) -> subprocess.CompletedProcess:
    """`evalkit-verdict` on the store's one sweep, its report into `folder`/report."""
    client, runs = job_runs(folder)
    (parent,) = [r for r in runs if r.data.tags.get("evalkit.role") == "sweep"]
    script = os.path.join(os.path.dirname(sys.executable), "evalkit-verdict")
    return subprocess.run([script, "--tracking-uri", store_uri(folder), "--parent-run-id", parent.info.run_id,
                           "--out", str(folder / "report")], capture_output=True, text=True, cwd=folder, timeout=300)


def assert_resumed_at_step_21(client, continuous, resumed):
    """A run resumed from the step-20 checkpoint records steps 21..40 and step 21's LR is the continuous
    run's; returns (continuous rows by step, resumed rows) for further checks."""
    full = {r["step"]: r for r in read_records(client, continuous.info.run_id)}
    rest = read_records(client, resumed.info.run_id)
    assert rest[0]["step"] == "21" and rest[-1]["step"] == "40"
    assert rest[0]["lr"] == full["21"]["lr"]
    return full, rest


def bf16_accumulating(workdir, *trainer: str):
    """bf16_mixed with grad_accum=2 on ADAPTER_SMALL (precision and accumulation in one run): (client, run)."""
    return run_ok(workdir, *trainer, *ADAPTER_SMALL, "precision=bf16_mixed", "train.grad_accum=2")


def resumed_from_step_20(workdir, *trainer: str, checkpoint: str):
    """ADAPTER_RESUME twice in one workdir: a run checkpointing every 20 steps, then one resumed from its
    `checkpoint` (a name inside its checkpoint dir): (client, continuous, resumed, checkpoint path)."""
    client, continuous = run_ok(workdir, *trainer, *ADAPTER_RESUME, "train.ckpt_every=20")
    path = os.path.join(continuous.data.tags["evalkit.checkpoint_dir"], checkpoint)
    _, resumed = run_ok(workdir, *trainer, *ADAPTER_RESUME, f"resume_from={path}")
    return client, continuous, resumed, path


def assert_lightning_ranks_joined(client, run) -> None:
    """Lightning/Fabric at world size 2: exactly evalkit's two workers joined (each log announces its own
    rank once, nobody else's), validation merged over both ranks, 32 samples per rank and step."""
    run_dir = run.data.tags["evalkit.run_dir"]
    logs = sorted(f for f in os.listdir(run_dir) if re.fullmatch(r"worker_rank\d+\.log", f))
    assert logs == ["worker_rank0.log", "worker_rank1.log"]
    for rank, name in enumerate(logs):
        with open(os.path.join(run_dir, name)) as fh:
            joins = re.findall(r"GLOBAL_RANK: (\d+), MEMBER: (\d+)/(\d+)", fh.read())
        assert joins == [(str(rank), str(rank + 1), "2")]
    val = read_records(client, run.info.run_id, "val_rank0.csv")
    assert all(r["ranks"] == "2" and r["samples"] == "128" for r in val)
    assert all(r["samples"] == "32" for r in read_records(client, run.info.run_id))


def worker_pids(marker: str) -> list[int]:
    """Live evalkit worker processes whose command line names `marker` (their run directory)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmd = open(f"/proc/{entry}/cmdline", "rb").read().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if "evalkit.worker" in cmd and marker in cmd:
                found.append(int(entry))
    return found


def wait_for_no_workers(marker: str, timeout: float, what: str = "a worker outlived its controller") -> None:
    """Wait until no evalkit worker whose command line names `marker` is alive; fail with `what` after `timeout`."""
    import time

    deadline = time.monotonic() + timeout
    while worker_pids(marker):
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


# ------------------------------------------------------------------ planted semantics and their recorded evidence
# The semantic probe's planted wrong variants (tests/planted/planted_loop.py), each with the finding it must raise.
# scripts/record_probe_fixtures.py records the evidence of every one (tests/fixtures/semantics/planted/), the unit
# tier judges those recordings (tests/unit/probes/semantics/test_judge_planted.py), and the e2e tier trains one
# variant of each family live and checks that the recording still matches.
# variant -> (finding code, first step); each group's jobs are the probe settings beside it in SETTINGS
SEMANTICS_WS1 = {
    "lr.per_micro_batch": ("lr.per_micro_batch", 2), "lr.per_epoch": ("lr.per_epoch", 2),
    "lr.twice_per_step": ("lr.twice_per_step", 2), "lr.warmup_off_by_one": ("lr.warmup_off_by_one", 1),
    "lr.warmup_unit": ("lr.warmup_unit", 1), "loss.window_summed": ("loss.window_summed", 1),
    "window.short_underscaled": ("window.short_underscaled", 4), "window.short_dropped": ("window.short_dropped", 4),
    "window.short_merged": ("window.short_merged", 4),
    "clip.unasked": ("clip.unasked", None),
    "wd.unasked": ("wd.unasked", 1), "order.shuffled": ("order.shuffled", 1),
    "forward.before_training": ("forward.before_training", 0), "forward.extra_train": ("forward.extra_train", 1),
    "val.train_mode": ("val.train_mode", 4), "val.cadence": ("val.cadence", 1),
    "steps.extra": ("steps.extra", 11), "steps.fewer": ("steps.fewer", 10),
    "precision.mismatch": ("precision.mismatch", 1), "unexplained": ("unexplained.update", 1),
}
SEMANTICS_WS1_BOTH_JOBS = {"clip.per_micro_batch": ("clip.per_micro_batch", None),
                           "clip.before_unscale": ("clip.before_unscale", 1),
                           "order.fixed_seed": ("order.fixed_seed", 1)}
SEMANTICS_WS2 = {"ddp.grad_summed": ("ddp.grad_summed", 1),
                 "order.distributed_interleave": ("order.distributed_interleave", 1),
                 "order.padded": ("order.padded", 1)}
# Planted loops whose evidence falls short of what a pass requires (issue 28): variant -> words of the inconclusive
# reason its judge must give (no finding, never a pass). tests/planted/silent_loop.py: the planted loop's semantics,
# its optimizer steps applied by hand (torch's optimizer hooks never fire); both jobs, the clip job too.
SEMANTICS_INCONCLUSIVE = {"evidence.silent_optimizer": "no optimizer step was observed"}
SILENT_LOOP = "trainer._target_=silent_loop.SilentStepAdapter"
# The optimizer a loop builds itself (issue 29), judged from its recorded param groups: the SGD job and the AdamW job
# (weight decay 0.1) of world size 1.
SEMANTICS_OPTIMIZER = {"optim.other": ("optim.other", 1), "optim.hyper": ("optim.hyper", 1),
                       "optim.unoptimized": ("optim.unoptimized", 1), "wd.skipped": ("wd.skipped", 1),
                       "lr.per_group": ("lr.per_group", 1), "lr.warmup_from_zero": ("lr.warmup_from_zero", 1)}
SGD_ONLY = "probe.optimizers=[sgd]"
# The short-epoch job (epochs shorter than one window) runs with the correct loop's recording (none.json.gz) and the
# carried windows' (shown there on every step); window.short_dropped and window.short_merged never step there (each
# waits for a window of 3 that never comes) and would only run into the job's time limit.
NO_SHORT = "probe.short_epoch=false"
# The token caliber's job runs with the correct loop's recording only: its normalizations are planted and judged in
# tests/unit/probes/semantics/test_normalization_tokens.py, and the other families were recorded without it.
NO_TOKENS = "probe.tokens=false"
SEMANTICS_WINDOWS = {"window.short_carried": ("window.short_carried", 4)}
SEMANTICS_SETTINGS = [(SEMANTICS_WS1, ["probe.world_sizes=[1]", "probe.clip=[false]", SGD_ONLY, NO_SHORT,
                                       NO_TOKENS]),
                      (SEMANTICS_WINDOWS, ["probe.world_sizes=[1]", "probe.clip=[false]", SGD_ONLY, NO_TOKENS]),
                      (SEMANTICS_WS1_BOTH_JOBS, ["probe.world_sizes=[1]", SGD_ONLY, NO_SHORT, NO_TOKENS]),
                      (SEMANTICS_WS2, ["probe.world_sizes=[2]", "probe.clip=[false]", SGD_ONLY, NO_SHORT, NO_TOKENS]),
                      (SEMANTICS_OPTIMIZER, ["probe.world_sizes=[1]", "probe.clip=[false]", NO_SHORT, NO_TOKENS]),
                      (SEMANTICS_INCONCLUSIVE, ["probe.world_sizes=[1]", SILENT_LOOP, SGD_ONLY, NO_SHORT,
                                                NO_TOKENS])]
SEMANTICS_PLANTED = {v: expected for group, _ in SEMANTICS_SETTINGS if group is not SEMANTICS_INCONCLUSIVE
                     for v, expected in group.items()}
RECORDED_SEMANTICS = FIXTURES / "semantics" / "planted"    # <variant>.json.gz, and none.json.gz (the correct loop)


def semantics_live_groups() -> list[tuple[list[str], list[str]]]:
    """(probe settings, variants) per group of SEMANTICS_SETTINGS: the first variant of each family (the part of a
    variant's name before its first dot) not yet taken, the ones the e2e tier trains live."""
    taken, groups = set(), []
    for variants, setting in SEMANTICS_SETTINGS:
        live = [v for v in variants if v.split(".")[0] not in taken and not taken.add(v.split(".")[0])]
        if live:
            groups.append((setting, live))
    return groups


def recorded_evidence(path: Path) -> list:
    """The jobs of a recorded probe fixture (evidence.save_fixture's JSON, gzipped or not)."""
    import gzip
    import json

    from evalkit.probes.evidence import JobEvidence

    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        return [JobEvidence.from_json(json.dumps(item)) for item in json.load(fh)]


def assert_semantic_inconclusive(result, variant: str) -> None:
    """The judged `result` (a ProbeResult's dict) of a variant of SEMANTICS_INCONCLUSIVE: inconclusive (no pass, no
    finding), its reason naming what is missing."""
    assert result["inconclusive"] and not result["passed"] and result["findings"] == [], result["notes"][:3]
    assert SEMANTICS_INCONCLUSIVE[variant] in result["notes"][0], result["notes"][0]
    assert result["headline"].startswith("0 findings on missing evidence: "), result["headline"]


def assert_semantic_finding(result, variant: str) -> None:
    """The judged `result` (a ProbeResult's dict) names the planted variant's finding at its first step, explained
    by an alternative semantics (or, for `unexplained`, by none)."""
    code, first_step = SEMANTICS_PLANTED[variant]
    assert not result["passed"]
    found = {f["code"]: f for f in result["findings"]}
    assert code in found, f"{variant}: found {sorted(found)}"
    if first_step is not None:
        assert found[code]["first_step"] == first_step, found[code]
    if code.startswith("unexplained"):
        assert found[code]["explained_by"] == []
        assert all(f["code"].startswith("unexplained") for f in result["findings"]), result["findings"]
    else:
        assert found[code]["explained_by"], found[code]


# ------------------------------------------------------------------ a team's tracking server
ADMIN_PASSWORD = "Adm1n-Team-pw-4f9Qz"
# Token-, password- and key-like values, in the environment of every command and in the config of every job.
SECRET_ENV = {"EVALKIT_TEST_API_TOKEN": "hf_Qm7Vn2Lp9Xr4Tz8Wk3Jd6Hs1Fb5Gc0Ya",
              "DATABASE_PASSWORD": "pgTeam-Pa55word-9931",
              "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYTEAMKEY01",
              "OPENAI_API_KEY": "sk-proj-4Hd8Kq2Lm7Np3Rt6Vx9Zb1Cf5Gj0Sw"}
CONFIG_SECRETS = {"note": "ghp_Tm9Xw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcB", "mirror_password": "mirror-Pa55-7731"}
# A job whose config holds them: the baseline as tests/planted/noted_loop.py's NotedAdapter, which takes these
# free-text options (a bundled adapter refuses a key it does not read); run with NOTED_ENV.
NOTED = ["trainer._target_=noted_loop.NotedAdapter", "trainer.name=noted",
         *(f"+trainer.options.{key}={value}" for key, value in CONFIG_SECRETS.items())]
NOTED_ENV = {"PYTHONPATH": os.pathsep.join(p for p in (str(PLANTED), os.environ.get("PYTHONPATH")) if p)}


class Team:
    """A team's server (scripts/team_server.py: `mlflow server` with MLflow's basic auth over PostgreSQL): its
    address, the environment a team member's commands run with."""

    def __init__(self, folder: Path):
        self.pg, self.server = start_team_server(folder, admin_password=ADMIN_PASSWORD)
        self.url = self.server.url
        self.env = {**SECRET_ENV, "MLFLOW_TRACKING_URI": self.url, "MLFLOW_TRACKING_USERNAME": "admin",
                    "MLFLOW_TRACKING_PASSWORD": ADMIN_PASSWORD}

    def client(self):
        from mlflow.tracking import MlflowClient

        os.environ.update(MLFLOW_TRACKING_USERNAME="admin", MLFLOW_TRACKING_PASSWORD=ADMIN_PASSWORD)
        return MlflowClient(self.url)

    def close(self) -> None:
        self.server.stop()
        self.pg.cleanup()


def everything_logged(client, run, folder: Path) -> str:
    """Every param, tag and metric key of a run, and the text of every artifact it has (downloaded)."""
    parts = [f"{k}={v}" for k, v in {**run.data.params, **run.data.tags}.items()] + list(run.data.metrics)
    target = folder / run.info.run_id
    target.mkdir()
    if client.list_artifacts(run.info.run_id):
        client.download_artifacts(run.info.run_id, "", str(target))
    for path in target.rglob("*"):
        if path.is_file():
            parts.append(path.read_bytes().decode("utf-8", "replace"))
    return "\n".join(parts)


# A real `mlflow server` (and PostgreSQL from a wheel) started by a test: scripts/team_server.py, which also starts
# one for a person to try a team's set-up by hand.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from team_server import MlflowServer, postgres_database, start_team_server  # noqa: E402,F401

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
PROBE_RUNS = {"consistency": CONSISTENCY_RUNS, "customization": CUSTOMIZATION_RUNS, "stability": STABILITY_RUNS,
              "functional": FUNCTIONAL_RUNS, "maintenance": MAINTENANCE_RUNS, "performance": PERFORMANCE_RUNS}
UNPLANTED_RUNS = {("consistency", "baseline"), ("functional", "handwritten")}   # no tests/planted on PYTHONPATH
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


def closed_port() -> int:
    """A local port nothing listens on."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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


def fake_env(root, name: str, python: str | None = None, **manifest):
    """A wrapper's environment as evalkit-env leaves it, without pip: its folder under `root`, `bin/python` (the
    script `python` when given, else an empty file) and its manifest (beside this torch and site-packages unless
    `manifest` says otherwise; None: incomplete)."""
    import json

    from evalkit import names
    from evalkit.envs.store import base_site_packages, torch_version

    path = Path(root) / name
    (path / "bin").mkdir(parents=True)
    (path / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (path / "bin" / "python").write_text(python or "")
    (path / "bin" / "python").chmod(0o755)
    if manifest.get("requirements", ()) is not None:
        full = {"name": name, "requirements": [], "resolved": {}, "installed": {}, "shadows": {},
                "torch": torch_version(), "base_site_packages": base_site_packages(), "created": "2026-12-05"}
        (path / names.ENV_MANIFEST_FILE).write_text(json.dumps({**full, **manifest}))
    return path


# ------------------------------------------------------------------ a store that fails under a sweep (evalkit-ship)
# The store fails once as the first job's run is recorded (its records wait in its spool), and once more as the
# sweep retries them at its end (as when that job's directory is busy); the parent run itself ends.
SWEEP_WITH_A_JOB_LEFT_WAITING = """
import sys
from evalkit.controller import job, job_reship
from evalkit import cli

finish, retry, failed = job.Controller._finish, job_reship.reship, []

def once(real, what):
    def planted(*args, **kwargs):
        if what not in failed:
            failed.append(what)
            raise RuntimeError("(sqlite3.OperationalError) database is locked")
        return real(*args, **kwargs)
    return planted

job.Controller._finish = once(finish, "job")
job_reship.reship = once(retry, "retry")
sys.argv = ["evalkit", "-m", *sys.argv[1:]]
cli.main()
"""
