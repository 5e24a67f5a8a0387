"""Run one probe for one wrapper and mode: a probe run in MLflow, its jobs as child runs, then the judge.

The probe run carries `evalkit.role=probe`, the probe's name, the trainer, mode, task and caliber; under a sweep
it is a child of the sweep's parent run. Each planned job is an ordinary evalkit job (same controller, same
observers) recorded as a child of the probe run with `evalkit.role=probe_job`, so the verdict never mixes it
with the sweep's own jobs. The judge reads the jobs back from the store (`evidence.load_job`) and its result
is logged on the probe run: `probe/<dim>/pass`, its figures, the reason tag, `probe/<dim>.json`,
`probe/<dim>.md` and the evidence it judged (`probe/<dim>_evidence.json`, to judge again offline).
"""
from __future__ import annotations

import copy
import json
import os
import sys
import tempfile
import traceback

from omegaconf import DictConfig, OmegaConf

from evalkit import names
from evalkit.config import validate
from evalkit.controller import tracking
from evalkit.controller.job.run import JobResult, reuse_finished, run_job, run_tags
from evalkit.controller.progress import say
from evalkit.controller.ui import trainer_label
from evalkit.probes.base import PlannedJob, Probe
from evalkit.probes.catalog import probe_from
from evalkit.probes.evidence import JobEvidence, load_job, save_fixture
from evalkit.probes.findings import ProbeResult
from evalkit.probes.your_task import on_your_task
from evalkit.strict_json import finite_only


def probe_job_config(cfg: DictConfig, probe: Probe, job: PlannedJob) -> DictConfig:
    """The config of one of the probe's jobs: the probe's config on the probe's task (its bundled settings, as
    `task=<name>` would compose them), with the plan's settings, no probe. A plan's `task` setting names another
    bundled task (the semantic probe's token caliber), composed as `task=<name>` would compose it, before the plan's
    `task.*` settings; its `trainer` setting names another bundled trainer (`"trainer": "baseline"`: the control arm
    of a comparison), composed as `trainer=<name>` would compose it."""
    child = copy.deepcopy(cfg)
    OmegaConf.set_struct(child, False)
    task = probe.task(cfg)
    if child.task.name != task:
        child.task = bundled_task_config(task)
    settings = dict(job.overrides)
    if "task" in settings:           # another bundled task than the probe's (the semantic probe's token caliber)
        child.task = bundled_task_config(settings.pop("task"))
    if "trainer" in settings:
        child.trainer = bundled_trainer_config(settings.pop("trainer"))
    for key, value in settings.items():
        OmegaConf.update(child, key, value, merge=False)
    child.probe.name = "none"
    child.run_name = f"{probe.name}-{cfg.trainer.name}-{cfg.trainer.mode}-{job.name}"
    OmegaConf.set_struct(child, True)
    return child


def bundled_task_config(name: str) -> DictConfig:
    """The task node `task=<name>` composes: its conf/task YAML merged into its schema."""
    from evalkit.config import bundled_task
    from evalkit.tasks.schemas import BUNDLED

    written = OmegaConf.to_container(bundled_task(name))
    written.pop("defaults", None)
    return OmegaConf.merge(OmegaConf.structured(BUNDLED[name]), written)


def bundled_trainer_config(name: str) -> DictConfig:
    """The trainer node `trainer=<name>` composes: its conf/trainer YAML merged into its schema."""
    from evalkit.config import TrainerConfig
    from evalkit.trainers import bundled_trainers

    return OmegaConf.merge(OmegaConf.structured(TrainerConfig), bundled_trainers()[name])


class ProbeRun:
    def __init__(self, cfg: DictConfig, run_dir: str):
        self.cfg, self.run_dir = cfg, os.path.abspath(run_dir)
        self.probe = probe_from(cfg.probe._target_)
        self.uri = tracking.resolve_uri(cfg.tracking.uri)
        self.client = tracking.open_client(self.uri)
        self.run_id: str | None = None
        self.done: dict[str, JobEvidence] = {}   # the jobs run so far, kept when the probe stops half-way

    def start(self) -> str:
        cfg, probe = self.cfg, self.probe
        tags = run_tags(cfg, os.environ.get(names.SWEEP_ID_ENV), role=names.ROLE_PROBE)
        tags.update({names.PROBE: probe.name, names.TASK: probe.task(cfg), names.CALIBER: probe.caliber(cfg),
                     names.YOUR_TASK: "true" if on_your_task(cfg) else None,
                     names.SEED: None, names.REPEAT: None, names.WORLD_SIZE: None, names.VAL_METRIC_MARGIN: None})
        if os.environ.get(names.PARENT_RUN_ENV):
            tags[names.MLFLOW_PARENT_RUN] = os.environ[names.PARENT_RUN_ENV]
        tags[names.MLFLOW_NOTE] = self.note("running")
        name = f"probe-{probe.name}-{cfg.trainer.name}-{cfg.trainer.mode}"
        adopted = os.environ.pop("MLFLOW_RUN_ID", None) if not os.environ.get(names.PARENT_RUN_ENV) else None
        if adopted:   # `mlflow run` created the run for this entry point: the probe records into it
            self.run_id = adopted
            tracking.set_tags(self.client, adopted, {"mlflow.runName": name, **tags})
        else:
            exp = tracking.experiment_id(self.client, cfg.tracking.experiment)
            tags = {**tracking.source_tags(self.uri, f"evalkit probe={probe.name}"), **tags}
            self.run_id = self.client.create_run(exp, run_name=name, tags={k: str(v) for k, v in tags.items()
                                                                          if v is not None}).info.run_id
        tracking.log_params(self.client, self.run_id, tracking.flatten(
            {"probe": OmegaConf.to_container(cfg.probe), "trainer": OmegaConf.to_container(cfg.trainer),
             "seed": cfg.seed, "hardware": cfg.hardware.name}))
        return self.run_id

    def note(self, outcome: str) -> str:
        """The probe run's description in one line."""
        return f"{self.cfg.trainer.name} ({self.cfg.trainer.mode}) under the {self.probe.name} probe: {outcome}"

    def run_jobs(self) -> tuple[list[JobEvidence], list[str]]:
        """Every planned job, phase after phase, each recorded as a child run and read back from the store."""
        done = self.done
        notes: list[str] = []
        previous_parent = os.environ.get(names.PARENT_RUN_ENV)
        os.environ[names.PARENT_RUN_ENV] = self.run_id
        try:
            while True:
                jobs, found = self.probe.plan(self.cfg, done)
                notes += [n for n in found if n not in notes]
                if not jobs:
                    break
                schedule = getattr(self.probe, "schedule", None)
                schedule = schedule(self.cfg, jobs) if callable(schedule) else None
                if schedule is not None:    # the phase's jobs run together, taking turns (controller/turns/rounds.py)
                    done.update(self._run_together(jobs, schedule))
                    continue
                for job in jobs:
                    done[job.name] = self._run_one(job)
        finally:
            if previous_parent is None:
                os.environ.pop(names.PARENT_RUN_ENV, None)
            else:
                os.environ[names.PARENT_RUN_ENV] = previous_parent
        return list(done.values()), notes

    def _config(self, job: PlannedJob) -> DictConfig:
        child = probe_job_config(self.cfg, self.probe, job)
        problems = validate(child)
        if problems:
            raise ValueError(f"the {self.probe.name} probe's job {job.name} has an invalid config: {problems[0]}")
        return child

    def _run_together(self, jobs: list[PlannedJob], schedule) -> dict[str, JobEvidence]:
        from evalkit.controller.turns.rounds import run_together

        say(self.cfg.tracking.progress, f"[evalkit] {self.probe.name} probe {trainer_label(self.cfg.trainer)}/"
                                        f"{self.cfg.trainer.mode}: {len(jobs)} jobs taking turns")
        planned = [(job.name, self._config(job), os.path.join(self.run_dir, job.name)) for job in jobs]
        results = run_together(planned, schedule, role=names.ROLE_PROBE_JOB)
        return {name: load_job(self.client, results[name].run_id, name) for name, _, _ in planned}

    def _run_one(self, job: PlannedJob) -> JobEvidence:
        child = self._config(job)
        arm = f"{trainer_label(self.cfg.trainer)}/{self.cfg.trainer.mode}"
        say(self.cfg.tracking.progress, f"[evalkit] {self.probe.name} probe {arm}: job {job.name}")
        result: JobResult = run_job(child, os.path.join(self.run_dir, job.name), role=names.ROLE_PROBE_JOB)
        return load_job(self.client, result.run_id, job.name)

    def crashed_job(self) -> str | None:
        """'<job>: <reason>' for the first job that ended FAILED or KILLED although its config planted no fault
        (the wrapper crashed where it should have trained; a refusal is not a crash), None when every job ended as
        planned."""
        for job in self.done.values():
            planted = any(job.config.get("faults", {}).values())
            if job.status != "FINISHED" and not planted and "UnsupportedCombination" not in job.failure_reason:
                return f"{job.name}: {job.failure_reason or job.status}"
        return None

    def measure(self) -> dict | None:
        """A probe that measures more than its jobs (sources, the installed packages) does it now, once; what it
        returns is stored beside the evidence (`probe/<dim>_measured.json`) and given to its judge."""
        measure = getattr(self.probe, "measure", None)
        if not callable(measure):
            return None
        say(self.cfg.tracking.progress,
            f"[evalkit] {self.probe.name} probe {trainer_label(self.cfg.trainer)}/{self.cfg.trainer.mode}: measuring")
        return measure(self.cfg)

    def record(self, result: ProbeResult, jobs: list[JobEvidence], measured: dict | None = None) -> None:
        dim, client, run_id = result.dimension, self.client, self.run_id
        points = [] if result.inconclusive else [tracking.metric(names.probe_pass(dim), float(result.passed), 0)]
        points += [tracking.metric(f"probe/{dim}/{k}", float(v), 0) for k, v in sorted(result.figures.items())
                   if v is not None]
        tracking.log_metrics(client, run_id, points)
        tags = {names.probe_reason(dim): result.reason or None, names.probe_status(dim): result.status,
                names.probe_headline(dim): result.headline or None,
                names.MLFLOW_NOTE: self.note(" · ".join(t for t in (result.status, result.headline, result.reason) if t)
                                             + f"; every finding in the artifact {names.PROBE_ARTIFACT_DIR}/{dim}.md")}
        # the wrapper's own jobs first: a probe's control arm (the baseline) carries torch's version as its own
        mine = [j for j in jobs if j.tags.get(names.TRAINER) == self.cfg.trainer.name]
        versions = next((j.tags for j in mine + jobs if j.tags.get(names.WRAPPER_VERSION)), {})
        for key in (names.WRAPPER_VERSION, names.TORCH_VERSION, names.QUICK_START_VERSION):
            tags[key] = versions.get(key)
        tracking.set_tags(client, run_id, tags)
        title = f"{self.probe.name} probe: {trainer_label(self.cfg.trainer)}/{self.cfg.trainer.mode}"
        with tempfile.TemporaryDirectory() as tmp:
            for name, text in ((names.probe_result_file(dim), result.to_json()),
                               (names.probe_report_file(dim), result.to_markdown(title))):
                with open(os.path.join(tmp, name), "w") as fh:
                    fh.write(text)
                client.log_artifact(run_id, os.path.join(tmp, name), names.PROBE_ARTIFACT_DIR)
            evidence = os.path.join(tmp, names.probe_evidence_file(dim))
            save_fixture(jobs, evidence)
            client.log_artifact(run_id, evidence, names.PROBE_ARTIFACT_DIR)
            if measured is not None:
                path = os.path.join(tmp, names.probe_measured_file(dim))
                with open(path, "w") as fh:
                    json.dump(finite_only(measured), fh, indent=1, default=str)
                client.log_artifact(run_id, path, names.PROBE_ARTIFACT_DIR)


def run_probe(cfg: DictConfig, run_dir: str) -> JobResult:
    """Run the probe `cfg.probe.name` for `cfg.trainer` end to end; the probe run ends FINISHED when the judge
    ran (whatever it found), FAILED when the probe itself could not run, KILLED on an interrupt."""
    reused = reuse_finished(cfg, names.ROLE_PROBE)
    if reused is not None:
        return reused
    runner = ProbeRun(cfg, run_dir)
    run_id = runner.start()
    try:
        jobs, notes = runner.run_jobs()
        measured = runner.measure()
        result = runner.probe.judge(jobs) if measured is None else runner.probe.judge(jobs, measured)
        result.notes = notes + result.notes
        runner.record(result, jobs, measured)
    except KeyboardInterrupt:
        tracking.set_tags(runner.client, run_id, {names.FAILURE_REASON: "interrupted",
                                                  names.MLFLOW_NOTE: runner.note("KILLED (interrupted)")})
        runner.client.set_terminated(run_id, "KILLED")
        raise
    except Exception as exc:  # noqa: BLE001 - the probe run records why it could not judge, with the traceback
        reason = f"{type(exc).__name__}: {exc}"
        traceback.print_exc()
        short = " ".join(reason.split())[:500]
        crashed = runner.crashed_job()
        tracking.set_tags(runner.client, run_id, {names.FAILURE_REASON: short,
                                                  names.PROBE_CRASHED_JOB: crashed and " ".join(crashed.split())[:500],
                                                  names.MLFLOW_NOTE: runner.note(f"FAILED: {short}")})
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "probe_traceback.txt")
            with open(path, "w") as fh:
                fh.write(traceback.format_exc())
            runner.client.log_artifact(run_id, path, names.FAILURE_ARTIFACT_DIR)
        runner.client.set_terminated(run_id, "FAILED")
        return JobResult(run_id, False, reason, "FAILED")
    runner.client.set_terminated(run_id, "FINISHED")
    print(summary_line(cfg, result, run_id), file=sys.stderr, flush=True)
    return JobResult(run_id, True, status="FINISHED")


def summary_line(cfg: DictConfig, result: ProbeResult, run_id: str) -> str:
    head = f"[evalkit] {result.dimension} probe {trainer_label(cfg.trainer)}/{cfg.trainer.mode}: "
    headline = f": {result.headline}" if result.headline else ""
    if result.inconclusive:
        return head + f"inconclusive{headline} (run {run_id})\n  - {result.reason}"
    if result.passed:
        return head + f"pass{headline} (run {run_id})"
    if not result.findings:
        return head + f"fail{headline} (run {run_id})" + (f"\n  - {result.reason}" if result.reason else "")
    lines = [head + f"fail, {len(result.findings)} finding(s) (run {run_id})"]
    lines += [f"  - {f.line()}" for f in result.findings]
    return "\n".join(lines)
