"""The names that writers and readers share, spelled once: MLflow tags, metric keys, artifact paths, and the
files and environment variables through which the controller and its workers meet.

The controller writes them (`controller/job.py`, `controller/ship.py`, `controller/sweep.py`), the analyzer and
the verdict read them back (`analysis/records.py`, `analysis/store.py`, `verdict/`). A name changed here
changes on both sides; a name spelled as a string elsewhere is a bug waiting for a rename.
"""
from __future__ import annotations

# --- the run directory: controller <-> workers -------------------------------------------------------------
JOB_FILE = "job.json"                 # the resolved config and paths, written by the controller, read by workers
RUN_FILE = "run.json"                 # the MLflow run and store the job records into (evalkit-ship reads it)
EXIT_CODES_FILE = "exit_codes.json"   # how the ranks ended (launch.Outcome), written by the controller
SPOOL_DIR = "spool"
RECORDS_DIR = "records"
CHECKPOINTS_DIR = "checkpoints"

# --- environment variables -----------------------------------------------------------------------------------
CONTROLLER_PID_ENV = "EVALKIT_CONTROLLER_PID"   # workers die with the controller that set it
PARENT_RUN_ENV = "EVALKIT_PARENT_RUN_ID"        # a sweep's parent run, for its jobs
SPAWN_WALL_ENV = "EVALKIT_SPAWN_WALL"           # time.time() when the controller started the worker (start-up cost)
CALL_PROFILE_FILE = "call_profile.json"             # observe.call_profile: the worker's profile (rank 0)
CPUS_AT_TURN_ENV = "EVALKIT_CPUS_AT_TURN"          # a job taking turns: the CPUs it pins itself to when it first waits
CPUS_ENV = "EVALKIT_CPUS"                       # a timed job's worker: the CPUs it pins itself to (e.g. "1")
# A warm server starts with this much padding in its arguments and in this variable: room for each forked worker to
# show its own command line and environment in /proc (evalkit.worker.zygote.show_as)
PROC_ROOM_ENV = "EVALKIT_PROC_ROOM"
PROC_ROOM = 4096
# A worker's start-up milestones, each summarized as `startup_<milestone>_s` (seconds since the process started)
STARTUP_MILESTONES = ("torch_imported", "wrapper_imported", "first_forward", "first_step")
SWEEP_ID_ENV = "EVALKIT_SWEEP_ID"
SWEEP_NAME_ENV = "EVALKIT_SWEEP_NAME"           # set by a caller that wants to know the sweep id in advance
SIDE_BY_SIDE_ENV = "EVALKIT_JOBS_SIDE_BY_SIDE"  # how many jobs the sweep's launcher runs at once on one machine

# --- tags ----------------------------------------------------------------------------------------------------
TAG_PREFIX = "evalkit."
ROLE, ROLE_JOB, ROLE_SWEEP, ROLE_VERDICT = "evalkit.role", "job", "sweep", "verdict"
ROLE_PROBE, ROLE_PROBE_JOB = "probe", "probe_job"   # a probe run, and the jobs it runs (its children)
PROBE = "evalkit.probe"                              # the probe's name, on its run
TRAINER, MODE, TASK = "evalkit.trainer", "evalkit.mode", "evalkit.task"
SEED, REPEAT, CALIBER = "evalkit.seed", "evalkit.repeat", "evalkit.caliber"
PRECISION, REQUESTED_PRECISION = "evalkit.precision", "evalkit.requested_precision"
OBSERVED_PRECISION, OBSERVED_DTYPES = "evalkit.observed_precision", "evalkit.observed_dtypes"
PRECISION_MISMATCH = "evalkit.precision_mismatch"
WORLD_SIZE, HARDWARE, SWEEP_ID = "evalkit.world_size", "evalkit.hardware", "evalkit.sweep_id"
VAL_METRIC = "evalkit.val_metric"
VAL_METRIC_HIGHER_IS_BETTER = "evalkit.val_metric_higher_is_better"
VAL_METRIC_SCALE = "evalkit.val_metric_scale"   # relative | absolute
VAL_METRIC_MARGIN = "evalkit.val_metric_margin"
FAILURE_REASON = "evalkit.failure_reason"
# On a probe run that crashed: "<job>: <reason>" for a job of the wrapper that crashed where nothing was planted (no
# fault asked), before the probe stopped; absent when only evalkit's own machinery failed.
PROBE_CRASHED_JOB = "evalkit.probe.crashed_job"
CONFIG_WARNINGS = "evalkit.config_warnings"
RUN_DIR, CHECKPOINT_DIR = "evalkit.run_dir", "evalkit.checkpoint_dir"
WRAPPER_VERSION, TORCH_VERSION, VERSION_PREFIX = "evalkit.wrapper_version", "evalkit.torch_version", "evalkit.version."
THROUGHPUT_METHOD, PEAK_MEM_METHOD = "evalkit.throughput_method", "evalkit.peak_mem_method"
RESUMED_FROM, RESUMED_FROM_RUN = "evalkit.resumed_from", "evalkit.resumed_from_run"
RESUMED_AT_STEP, RESUME_UNCHECKED = "evalkit.resumed_at_step", "evalkit.resume_unchecked"
SWEEP_DIR, OVERRIDES = "evalkit.sweep_dir", "evalkit.overrides"
JOBS, JOBS_FAILED = "evalkit.jobs", "evalkit.jobs_failed"
SCENARIO = "evalkit.scenario"
FINGERPRINT = "evalkit.fingerprint"                  # a job's resolved config, tracking settings aside (hash)
JOBS_REUSED = "evalkit.jobs_reused"                  # on a resumed sweep's parent: jobs whose earlier run it kept
REUSED_RUNS_ARTIFACT = "sweep/reused_runs.json"      # ... and those runs' ids (the verdict reads them with the sweep)
VERDICT_RUN_ID = "evalkit.verdict_run_id"            # on a sweep's parent: the verdict run that judged it
# MLflow's own tags, read by its UI: a run's or experiment's description (markdown), the experiment's layout
# ("custom_model_development": the training layout, not the GenAI one), a dataset input's role.
MLFLOW_NOTE, MLFLOW_EXPERIMENT_KIND = "mlflow.note.content", "mlflow.experimentKind"
EXPERIMENT_KIND_TRAINING = "custom_model_development"
MLFLOW_DATASET_CONTEXT = "mlflow.data.context"

# --- metrics (step = optimizer step) -------------------------------------------------------------------------
TRAIN_LOSS, TRAIN_LR, TRAIN_GRAD_NORM = "train/loss", "train/lr", "train/grad_norm"
TRAIN_STEP_TIME, TRAIN_LOSS_SCALE, TRAIN_SKIPPED = "train/step_time_s", "train/loss_scale", "train/skipped_steps"
SYS_RSS_MIB = "sys/rss_mib"     # observe.memory_every: the worker's RSS through the run
VAL_PREFIX, VAL_LOSS = "val/", "val/loss"
PERF_SAMPLES_PER_S, PERF_STEPS_PER_S = "perf/samples_per_s", "perf/steps_per_s"
PERF_STEP_TIME_MEDIAN, PERF_WINDOW_STEPS = "perf/step_time_median_s", "perf/window_steps"
PERF_PEAK_MEM = "perf/peak_mem_bytes"                 # + f"_rank{r}" per rank; CPU: training memory
PERF_PEAK_RSS_GROWTH = "perf/peak_rss_growth_bytes"
PERF_IMPORT_RSS = "perf/import_rss_bytes"             # CPU: RSS after the wrapper's imports (not training memory)
PERF_NVML_PEAK = "perf/nvml_peak_used_bytes"


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


# --- artifacts -----------------------------------------------------------------------------------------------
STEPS_CSV_NAME, VAL_CSV_NAME, MICRO_CSV_NAME = "steps_rank0.csv", "val_rank0.csv", "micro_rank0.csv"
PARAMS_CSV_NAME = "params_rank0.csv"
OPTIMIZER_JSON_NAME = "optimizer_rank0.json"   # the optimizer stepped: class, param groups, hyperparameters
MEMORY_CSV_NAME = "memory_rank0.csv"   # observe.memory_every: RSS (CUDA memory) and log bytes through the run
MEMORY_COLUMNS = ["step", "rss", "log_bytes", "cuda_allocated", "nvml_used"]
VALUES_CSV_NAME = "values_rank0.csv"   # values an adapter reported through `TrainJob.log_value` (e.g. a callback's)
VALUES_COLUMNS = ["call", "step", "name", "value"]
STEPS_CSV = f"{RECORDS_DIR}/{STEPS_CSV_NAME}"


def micro_csv_name(rank: int) -> str:
    """Each rank's micro-batch records (sample ids, mode, dtype, loss): `micro_rank<r>.csv`."""
    return f"micro_rank{rank}.csv"


VAL_CSV = f"{RECORDS_DIR}/{VAL_CSV_NAME}"

# --- precision: config name -> the compute dtype the observers report -----------------------------------------
PRECISION_DTYPES = {"fp32": "float32", "bf16_mixed": "bfloat16", "fp16_mixed": "float16"}
