#!/usr/bin/env bash
# Fetch the wheels the GPU machine lacks (scripts/device_wheels.txt) into .whl/ for scripts/cuda_check.sh.
# Run here, where pip reaches the package registry; the GPU machine reaches nothing. About 36 MB.
set -euo pipefail
cd "$(dirname "$0")/.."
PIP=${PIP:-.venv/bin/pip}
mkdir -p .whl
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
mapfile -t wanted < <(grep -v '^#' scripts/device_wheels.txt | grep -v '^antlr4-python3-runtime')
# antlr4-python3-runtime 4.9.3 (hydra's pin) exists only as an sdist: build its pure-Python wheel here.
"$PIP" wheel -q --no-deps -w .whl "$(grep '^antlr4-python3-runtime' scripts/device_wheels.txt)"
"$PIP" download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl "${wanted[@]}"
echo "$(ls .whl/*.whl | wc -l) wheels, $(du -sh .whl | cut -f1) in .whl/"
