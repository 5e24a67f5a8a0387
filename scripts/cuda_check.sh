#!/usr/bin/env bash
# The GPU verification in one call (device machine: python3 with torch, lightning, accelerate and
# transformers preinstalled; the rest carried as wheels in .whl/, see scripts/fetch_device_wheels.sh).
#   device run: bash scripts/cuda_check.sh        (carry: [".whl"]; writes its results under $OUT)
# It runs tests/e2e/test_cuda.py (every adapter x fp32/bf16_mixed/fp16_mixed on CUDA, NCCL DDP when two
# GPUs are visible), tabulates the runs those tests recorded, then measures the observer overhead on CUDA.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/cuda_check_out}
PY=${PYTHON:-python3}
BASE=${CUDA_CHECK_TMP:-/tmp/cuda_check}
mkdir -p "$OUT"
rm -rf "$BASE"
export PYTHONUNBUFFERED=1 MLFLOW_DISABLE_TELEMETRY=true
WHEELS=${DEVICE_WHEELS:-.whl}      # DEVICE_WHEELS=none: use the packages already installed
if compgen -G "$WHEELS/*.whl" >/dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$WHEELS"/*.whl \
        || { echo "wheel install failed" | tee "$OUT/FAILED"; exit 1; }
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD/src:$PWD${PYTHONPATH:+:$PYTHONPATH}
{
    nvidia-smi 2>&1 || echo "nvidia-smi: not available"
    "$PY" - <<'PY'
import torch, importlib.metadata as md
print("torch", torch.__version__, "cuda", torch.version.cuda, "devices", torch.cuda.device_count(),
      "bf16", torch.cuda.is_available() and torch.cuda.is_bf16_supported())
for name in ("lightning", "accelerate", "transformers", "pytorch-ignite", "mlflow", "hydra-core", "nvidia-ml-py"):
    try:
        print(name, md.version(name))
    except md.PackageNotFoundError:
        print(name, "MISSING")
PY
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

# 1. The CUDA tests; pytest's --basetemp keeps each test's MLflow store for the table below.
timeout "${TEST_TIMEOUT:-420}" "$PY" -m pytest -p no:cacheprovider tests/e2e/test_cuda.py -v -n "${WORKERS:-6}" \
    --timeout 400 --basetemp "$BASE" --junitxml "$OUT/test_cuda.xml" 2>&1 | tee "$OUT/test_cuda.log"
status=${PIPESTATUS[0]}

# 2. What the runs recorded: precision requested/observed, throughput, allocator peak, NVML, loss scale.
"$PY" scripts/cuda_summary.py "$BASE" --json "$OUT/runs.json" 2>&1 | tee "$OUT/runs.tsv"

# 3. Observer overhead on the GPU (side by side in one process, ratio printed).
timeout "${BENCH_TIMEOUT:-120}" "$PY" scripts/bench_overhead.py hardware=cuda 2>&1 | tee "$OUT/bench_overhead.log"

echo "test_cuda exit status: $status" | tee -a "$OUT/test_cuda.log"
exit "$status"
