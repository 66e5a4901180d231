#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh) and runs the whole test suite:
#   C++ unit tests (GoogleTest via CTest, warnings as errors) and the Python tests (pytest)
#   against the installed package. Idempotent; a second run rebuilds only what changed.
set -euo pipefail
DEEPINFER_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$DEEPINFER_ROOT"
. scripts/setup.sh

JOBS="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
BUILD_DIR="${DEEPINFER_TEST_BUILD_DIR:-build/test}"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDEEPINFER_WERROR=ON \
  -DPython_EXECUTABLE="$DEEPINFER_ROOT/.venv/bin/python" >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS"
python -m pytest tests/python tests/e2e -q
