"""The names that writers and readers share, spelled once: MLflow tags, metric keys, artifact paths, and the
files and environment variables through which the controller and its workers meet.

The controller writes them (`controller/job/run.py`, `controller/job/shipper.py`, `controller/sweep/callback.py`), the
analyzer and the verdict read them back (`analysis/records.py`, `analysis/store.py`, `verdict/`). A name changed here
changes on both sides; a name spelled as a string elsewhere is a bug waiting for a rename.

Each name's comment (on its line, or the comment lines right above it) is its description in docs/records.md,
which `python scripts/docs.py write` generates from this file; a unit test fails when the document is stale or a
name has no comment.
"""
from __future__ import annotations

# --- the run directory: controller <-> workers -------------------------------------------------------------
JOB_FILE = "job.json"                 # the resolved config and paths, written by the controller, read by workers
RUN_FILE = "run.json"                 # the MLflow run and store the job records into (evalkit-ship reads it)
EXIT_CODES_FILE = "exit_codes.json"   # how the ranks ended (launch/workers.py, Outcome), written by the controller
SPOOL_DIR = "spool"                   # what the workers append (one write per optimizer step) until it is shipped
RECORDS_DIR = "records"               # the records as CSV files, written at the job's end and logged as artifacts
CHECKPOINTS_DIR = "checkpoints"       # the adapter's checkpoints (`TrainJob.ckpt_dir`; tag evalkit.checkpoint_dir)
CALL_PROFILE_FILE = "call_profile.json"   # observe.call_profile: the worker's profile (rank 0), artifact evalkit/
VERSIONS_FILE = "versions.json"       # in the spool: the wrapper's versions and torch's (rank 0), artifact evalkit/
TASK_INFO_FILE = "task.json"          # in the spool: the task's metric, its direction and scale, its data (rank 0)
EFFECTIVE_CONFIG_FILE = "effective_config.json"   # the adapter's effective_config() (rank 0), artifact evalkit/
NODES_DIR = "nodes"                   # several nodes: each node's report of how its ranks ended, and the stop request
LIGHTNING_DIR = "lightning"           # the Lightning adapter's own logs (its default_root_dir) beside the checkpoints
PREVIOUS_DIR = "previous"             # an earlier job's files, moved aside when a job takes its run directory
WORKER_LOG_GLOB = "worker_rank*.log"  # every rank's log (see worker_log)


def summary_file(rank: int) -> str:
    """A rank's summary at its end (figures, start-up marks; `system_exit` when it asked to stop), in the spool and
    as the artifact `evalkit/summary_rank<r>.json`."""
    return f"summary_rank{rank}.json"


def launch_file(rank: int) -> str:
    """The launcher variables a rank received (evalkit.launchers.received), written at its start, in the spool and as
    the artifact `evalkit/launch_rank<r>.json`."""
    return f"launch_rank{rank}.json"


def error_file(rank: int | str) -> str:
    """The error of a rank that raised (its first line says what), in the spool and as the artifact
    `failure/error_rank<r>.txt` (`*` for r: every rank's, as a pattern)."""
    return f"error_rank{rank}.txt"


def worker_log(rank: int) -> str:
    """A rank's stdout and stderr in the run directory, and the artifact `logs/worker_rank<r>.log`."""
    return f"worker_rank{rank}.log"


# --- environment variables -----------------------------------------------------------------------------------
CONTROLLER_PID_ENV = "EVALKIT_CONTROLLER_PID"   # workers die with the controller that set it
PARENT_RUN_ENV = "EVALKIT_PARENT_RUN_ID"        # a sweep's parent run, for its jobs
SPAWN_WALL_ENV = "EVALKIT_SPAWN_WALL"           # time.time() when the controller started the worker (start-up cost)
CPUS_AT_TURN_ENV = "EVALKIT_CPUS_AT_TURN"          # a job taking turns: the CPUs it pins itself to when it first waits
CPUS_ENV = "EVALKIT_CPUS"                       # a timed job's worker: the CPUs it pins itself to (e.g. "1")
# A warm server starts with this much padding in its arguments and in this variable: room for each forked worker to
# show its own command line and environment in /proc (evalkit.worker.warm_server.show_as)
PROC_ROOM_ENV = "EVALKIT_PROC_ROOM"
PROC_ROOM = 4096                                # the padding's length, in characters
SWEEP_ID_ENV = "EVALKIT_SWEEP_ID"               # the sweep a job belongs to (its tag evalkit.sweep_id)
SWEEP_NAME_ENV = "EVALKIT_SWEEP_NAME"           # set by a caller that wants to know the sweep id in advance
SIDE_BY_SIDE_ENV = "EVALKIT_JOBS_SIDE_BY_SIDE"  # how many jobs the sweep's launcher runs at once on one machine
# where `evalkit-env` keeps the wrappers' environments (default: $XDG_CACHE_HOME/evalkit/envs, ~/.cache/evalkit/envs)
ENVS_DIR_ENV = "EVALKIT_ENVS_DIR"

# --- tags ----------------------------------------------------------------------------------------------------
TAG_PREFIX = "evalkit."                             # every tag of evalkit's own starts so
ROLE = "evalkit.role"                               # what a run is: job, sweep, verdict, probe or probe_job
ROLE_JOB = "job"                                    # a training job (a sweep's, or alone)
ROLE_SWEEP = "sweep"                                # a sweep's parent run: its jobs are its children
ROLE_VERDICT = "verdict"                            # the run evalkit-verdict records its report in
ROLE_PROBE, ROLE_PROBE_JOB = "probe", "probe_job"   # a probe run, and the jobs it runs (its children)
PROBE = "evalkit.probe"                              # the probe's name, on its run
YOUR_TASK = "evalkit.your_task"                     # "true" on a probe run that trained a team's task (not its own)
TRAINER = "evalkit.trainer"                         # the trainer (`trainer.name`): baseline, lightning, ...
MODE = "evalkit.mode"                               # aligned | defaults (`trainer.mode`)
TASK = "evalkit.task"                               # the task it trains (`task.name`)
SEED = "evalkit.seed"                               # the seed of the task, the data order and the RNGs
REPEAT = "evalkit.repeat"                           # the repeat index: the same seed run again (the machine's noise)
# hardware, threads, batch per device, accumulation, precision, world size, warm-up steps, e.g.
# `hw=cpu|thr=2|bs=32|accum=1|prec=fp32|ws=1|warmup=5`: only runs of one caliber are compared
CALIBER = "evalkit.caliber"
PRECISION = "evalkit.precision"                     # the precision the run asked for (fp32, bf16_mixed, fp16_mixed)
REQUESTED_PRECISION = "evalkit.requested_precision"   # the same request, kept beside what the hooks saw
OBSERVED_PRECISION = "evalkit.observed_precision"   # the compute precision the hooks saw in the training forwards
OBSERVED_DTYPES = "evalkit.observed_dtypes"         # every compute dtype the hooks saw, with its count (JSON)
PRECISION_MISMATCH = "evalkit.precision_mismatch"   # set when the wrapper ran another precision than asked
WORLD_SIZE = "evalkit.world_size"                   # ranks in the job
HARDWARE = "evalkit.hardware"                       # the `hardware=` choice: cpu, cuda or auto
SWEEP_ID = "evalkit.sweep_id"                       # the sweep the run belongs to (evalkit-verdict --sweep-id)
VAL_METRIC = "evalkit.val_metric"                   # the task's validation metric (mse, accuracy, perplexity)
VAL_METRIC_HIGHER_IS_BETTER = "evalkit.val_metric_higher_is_better"   # its direction
VAL_METRIC_SCALE = "evalkit.val_metric_scale"   # relative | absolute
VAL_METRIC_MARGIN = "evalkit.val_metric_margin"     # the task's equivalence margin on that metric
FAILURE_REASON = "evalkit.failure_reason"           # on a FAILED or KILLED run: why, in one line
WINDING_DOWN = "evalkit.winding_down"               # on a run ended at an interrupt before its records all shipped
ENDED_BY = "evalkit.ended_by"                       # on a FINISHED run short of max_steps: the stop it declared
# In the failure reason of a run whose fit returned short of max_steps without a declared stop (worker/run.py)
FIT_RETURNED_SHORT = "the adapter's fit returned before train.max_steps"
# On a probe run that crashed: "<job>: <reason>" for a job of the wrapper that crashed where nothing was planted (no
# fault asked), before the probe stopped; absent when only evalkit's own machinery failed.
PROBE_CRASHED_JOB = "evalkit.probe.crashed_job"
CONFIG_WARNINGS = "evalkit.config_warnings"         # valid settings that lose a measurement (`evalkit: warning: ...`)
RUN_DIR = "evalkit.run_dir"                         # the job's run directory (spool, records, logs)
CHECKPOINT_DIR = "evalkit.checkpoint_dir"           # its checkpoints: what `resume_from=` takes
WRAPPER_VERSION = "evalkit.wrapper_version"         # the installed version of the wrapper the run trained with
QUICK_START_VERSION = "evalkit.quick_start_version"  # defaults mode: the release whose quick start the adapter follows
TORCH_VERSION = "evalkit.torch_version"             # the installed torch
VERSION_PREFIX = "evalkit.version."                 # + a distribution: its version (torch and the YAML's requirements)
LAUNCH = "evalkit.launch"                           # the launcher whose variables the ranks got (evalkit.launchers)
TRAINER_ENV = "evalkit.env"                         # `trainer.env`: the environment whose interpreter ran the workers
ENV_SEPARATOR = "@"   # an arm in a wrapper's own environment reads <trainer>@<env> (verdict, progress, run names)
THROUGHPUT_METHOD = "evalkit.throughput_method"     # how perf/samples_per_s was measured (its window of steps)
PEAK_MEM_METHOD = "evalkit.peak_mem_method"         # how perf/peak_mem_bytes was read (CPU RSS; CUDA allocator)
RESUMED_FROM = "evalkit.resumed_from"               # a resumed run: the checkpoint it continued from
RESUMED_FROM_RUN = "evalkit.resumed_from_run"       # ... the run that wrote it
RESUMED_AT_STEP = "evalkit.resumed_at_step"         # ... and the optimizer step it continued after
RESUME_UNCHECKED = "evalkit.resume_unchecked"       # a checkpoint without the job.json of the job that wrote it
SWEEP_DIR = "evalkit.sweep_dir"                     # on a sweep's parent: the sweep's directory (evalkit-ship takes it)
OVERRIDES = "evalkit.overrides"                     # on a sweep's parent: the command line's overrides
JOBS = "evalkit.jobs"                               # on a sweep's parent: how many jobs it ran
JOBS_FAILED = "evalkit.jobs_failed"                 # ... and how many of them failed
SCENARIO = "evalkit.scenario"                       # on a verdict run: the scenario whose weights rank the wrappers
# a job's resolved config, tracking settings aside, and the versions it runs with (hash; fingerprint.versions)
FINGERPRINT = "evalkit.fingerprint"
CONFIG_FINGERPRINT = "evalkit.config_fingerprint"    # ... of its resolved config alone: the same job at other versions
FINGERPRINTED_VERSIONS = "evalkit.fingerprinted_versions"   # ... the versions its fingerprint holds (JSON)
JOBS_REUSED = "evalkit.jobs_reused"                  # on a resumed sweep's parent: jobs whose earlier run it kept
REUSED_RUNS_ARTIFACT = "sweep/reused_runs.json"      # ... and those runs' ids (the verdict reads them with the sweep)
VERDICT_RUN_ID = "evalkit.verdict_run_id"            # on a sweep's parent: the verdict run that judged it
JUDGED_PARENT_RUN = "evalkit.parent_run_id"         # on a verdict run: the sweep's parent run it judged
# MLflow's own tags, read by its UI: a run's or experiment's description (markdown, one line for a job)
MLFLOW_NOTE = "mlflow.note.content"
MLFLOW_EXPERIMENT_KIND = "mlflow.experimentKind"    # the experiment's layout in MLflow's UI
EXPERIMENT_KIND_TRAINING = "custom_model_development"   # ... the training layout (runs, charts), not the GenAI one
MLFLOW_PARENT_RUN = "mlflow.parentRunId"           # the run MLflow nests this one under (a sweep's, a probe's)
MLFLOW_GIT_COMMIT = "mlflow.source.git.commit"      # the commit of evalkit's code that ran the job
MLFLOW_DATASET_CONTEXT = "mlflow.data.context"      # a dataset input's role: training | evaluation

# --- metrics (step = optimizer step) -------------------------------------------------------------------------
TRAIN_LOSS = "train/loss"                           # the training loss of each optimizer step
TRAIN_LR = "train/lr"                               # the LR the optimizer stepped with
TRAIN_GRAD_NORM = "train/grad_norm"                 # the global gradient norm the optimizer stepped with
TRAIN_STEP_TIME = "train/step_time_s"               # wall seconds of each optimizer step
TRAIN_LOSS_SCALE = "train/loss_scale"               # fp16: GradScaler's scale
TRAIN_SKIPPED = "train/skipped_steps"               # fp16: optimizer steps GradScaler skipped so far
SYS_RSS_MIB = "sys/rss_mib"     # observe.memory_every: the worker's RSS through the run
VAL_PREFIX = "val/"                                 # + the task's metric: its curve (see val_metric)
VAL_LOSS = "val/loss"                               # the validation loss, computed by evalkit from eval-mode outputs
# summaries, after `observe.warmup_steps` with validation intervals excluded: samples (over every rank) and optimizer
# steps per second, the median step time and the steps of that window
PERF_SAMPLES_PER_S = "perf/samples_per_s"
PERF_STEPS_PER_S = "perf/steps_per_s"               # optimizer steps per second over the same window
PERF_STEP_TIME_MEDIAN = "perf/step_time_median_s"   # the median step time over it
PERF_WINDOW_STEPS = "perf/window_steps"             # the optimizer steps it held
# + f"_rank{r}" per rank; CPU: training memory, the peak RSS above the RSS after the wrapper's imports and a tiny
# torch warm-up (before the task was built); CUDA: the allocator's max_memory_allocated
PERF_PEAK_MEM = "perf/peak_mem_bytes"


def perf_peak_mem_rank(rank: int) -> str:
    """One rank's training memory (as PERF_PEAK_MEM): `perf/peak_mem_bytes_rank<r>`."""
    return f"{PERF_PEAK_MEM}_rank{rank}"


PERF_PEAK_RSS_GROWTH = "perf/peak_rss_growth_bytes"   # CPU: the peak RSS's growth over the RSS at the window's start
PERF_IMPORT_RSS = "perf/import_rss_bytes"             # CPU: RSS after the wrapper's imports (not training memory)
PERF_NVML_PEAK = "perf/nvml_peak_used_bytes"        # CUDA: device memory in use as NVML saw it (sampled every 50 ms)


def val_metric(name: str) -> str:
    """The curve of a task's validation metric: `val/<name>`."""
    return VAL_PREFIX + name


def probe_pass(dimension: str) -> str:
    """The metric a probe logs for its dimension's pass (1) or fail (0): `probe/<dimension>/pass`."""
    return f"probe/{dimension}/pass"


def probe_status(dimension: str) -> str:
    """The tag with a probe's outcome, pass | fail | inconclusive: `evalkit.probe.<dimension>.status`
    (`probe/<dimension>/pass` is logged only when the probe decided)."""
    return f"evalkit.probe.{dimension}.status"


def probe_headline(dimension: str) -> str:
    """The tag with a probe's headline figure for the verdict cell: `evalkit.probe.<dimension>.headline`."""
    return f"evalkit.probe.{dimension}.headline"


def probe_reason(dimension: str) -> str:
    """The tag with a failed probe's reason in one line: `evalkit.probe.<dimension>.reason`."""
    return f"evalkit.probe.{dimension}.reason"


PROBE_ARTIFACT_DIR = "probe"   # probe/<dim>.json (every finding), probe/<dim>.md, probe/<dim>_evidence.json
PROBE_EVIDENCE_SUFFIX = "_evidence.json"   # probe/<dim>_evidence.json: the judged jobs' records (not a result)
PROBE_MEASURED_SUFFIX = "_measured.json"   # probe/<dim>_measured.json: what the probe measured beside its jobs


def probe_result_file(dimension: str) -> str:
    """A probe run's result, every finding with its evidence: the artifact `probe/<dimension>.json`."""
    return f"{dimension}.json"


def probe_report_file(dimension: str) -> str:
    """A probe run's result as markdown: the artifact `probe/<dimension>.md`."""
    return f"{dimension}.md"


def probe_evidence_file(dimension: str) -> str:
    """The records a probe's judge read (re-judged offline by scripts/rejudge_probe.py):
    `probe/<dimension>_evidence.json`."""
    return dimension + PROBE_EVIDENCE_SUFFIX


def probe_measured_file(dimension: str) -> str:
    """What a probe measured beside its jobs (the maintenance probe's environment):
    `probe/<dimension>_measured.json`."""
    return dimension + PROBE_MEASURED_SUFFIX


# --- artifacts -----------------------------------------------------------------------------------------------
SPOOL_ARTIFACT_DIR = "evalkit"        # the spool's JSON files: summaries, effective config, versions, call profile
CONFIG_ARTIFACT_DIR = "config"        # the job's resolved config (secrets redacted), as RESOLVED_CONFIG_FILE
RESOLVED_CONFIG_FILE = "resolved.yaml"   # ... its file name there
ENV_ARTIFACT_DIR = "env"              # the environment lock (lock.txt: every distribution) and hardware.json
# in a wrapper's environment (`evalkit-env`): what it was created from and holds; with `trainer.env`, artifact env/
ENV_MANIFEST_FILE = "evalkit-env.json"
LOGS_ARTIFACT_DIR = "logs"            # the ranks' logs (worker_log)
FAILURE_ARTIFACT_DIR = "failure"      # the errors of the ranks that raised (error_file); a probe's traceback
VERDICT_ARTIFACT_DIR = "verdict"      # a verdict run's report: verdict.md, verdict.html and VERDICT_JSON_FILE
VERDICT_JSON_FILE = "verdict.json"    # ... the verdict as data (the findings document reads it)
STEPS_CSV_NAME = "steps_rank0.csv"    # per optimizer step: loss, LR, grad norm, time, samples, RNG digest
VAL_CSV_NAME = "val_rank0.csv"        # one row per validation, merged over the ranks
MICRO_CSV_NAME = "micro_rank0.csv"    # one row per micro-batch: sample ids, grad/train mode, compute dtype, loss
PARAMS_CSV_NAME = "params_rank0.csv"  # observe.params: the parameters after every optimizer step (float32)
OPTIMIZER_JSON_NAME = "optimizer_rank0.json"   # the optimizer stepped: class, param groups, hyperparameters
MEMORY_CSV_NAME = "memory_rank0.csv"   # observe.memory_every: RSS (CUDA memory) and log bytes through the run
MEMORY_COLUMNS = ["step", "rss", "log_bytes", "cuda_allocated", "nvml_used"]   # ... its columns
VALUES_CSV_NAME = "values_rank0.csv"   # values an adapter reported through `TrainJob.log_value` (e.g. a callback's)
VALUES_COLUMNS = ["call", "step", "name", "value"]   # ... its columns
STEPS_CSV = f"{RECORDS_DIR}/{STEPS_CSV_NAME}"        # the step records, as the run's artifact path
# A worker's start-up milestones, each summarized as `startup_<milestone>_s` (seconds since the process started) in
# its summary (`evalkit/summary_rank<r>.json`)
STARTUP_MILESTONES = ("torch_imported", "wrapper_imported", "first_forward", "first_step")


def micro_csv_name(rank: int) -> str:
    """Each rank's micro-batch records (sample ids, mode, dtype, loss): `micro_rank<r>.csv`."""
    return f"micro_rank{rank}.csv"


VAL_CSV = f"{RECORDS_DIR}/{VAL_CSV_NAME}"            # the validation records, as the run's artifact path

# --- precision: config name -> the compute dtype the observers report -----------------------------------------
PRECISION_DTYPES = {"fp32": "float32", "bf16_mixed": "bfloat16", "fp16_mixed": "float16"}   # `precision=` -> dtype
