#!/usr/bin/env bash
# The CUDA op harness on a GPU machine, in one command, from the repository root:
#
#   tools/gpu/run_cuda_ops.sh            # logs to $OUT (the device tool's folder) or build/gpu-out
#
# Configures the minimal tree (DEEPINFER_BUILD_MINIMAL: base, tensor, backends, the CUDA harness;
# no nlohmann_json / CLI11 / ICU / GoogleTest needed), builds only ops_cuda_test and
# kernels_host_test for sm_90a with -j16, runs the scalar-rule check, every op case of
# tests/ops/cases on CudaOps vs the ref oracle (tests/ops/op_harness.h),
# then the perf mode at V4-Flash shapes. Every step has a time
# limit so the whole run stays under ~6 minutes. Logs: env.log, configure.log, build.log,
# kernels_host.log, harness.log, perf.log, summary.txt. Exit status: the harness's (0 pass,
# 1 fail, 77 no GPU), or 3 when configure/build failed.
#
# Knobs (environment): CUDA_ARCHS (default 90a), BUILD_DIR (default build/gpu), JOBS (16),
# FILTER (passed as --filter= to both runs), SKIP_PERF=1.
set -u
cd "$(dirname "$0")/../.."
OUT="${OUT:-$PWD/build/gpu-out}"
BUILD_DIR="${BUILD_DIR:-build/gpu}"
CUDA_ARCHS="${CUDA_ARCHS:-90a}"
JOBS="${JOBS:-16}"
mkdir -p "$OUT" "$BUILD_DIR"
T0=$(date +%s)
: > "$OUT/summary.txt"
say() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$OUT/summary.txt"; }

NVCC="$(command -v nvcc || true)"
[ -z "$NVCC" ] && [ -x /usr/local/cuda/bin/nvcc ] && NVCC=/usr/local/cuda/bin/nvcc
GEN="Unix Makefiles"
command -v ninja >/dev/null 2>&1 && GEN=Ninja
{
  echo "date: $(date -u)"; echo "host: $(uname -a)"; echo "generator: $GEN"; echo "nvcc: $NVCC"
  nvidia-smi 2>&1 | head -20
  [ -n "$NVCC" ] && "$NVCC" --version
  cmake --version | head -1
  c++ --version | head -1
} > "$OUT/env.log" 2>&1
say "env: $(grep -m1 -o 'NVIDIA H[0-9A-Za-z ]*' "$OUT/env.log" || echo 'no nvidia-smi GPU line'), nvcc ${NVCC:-missing}"

CFG=(-S . -B "$BUILD_DIR" -G "$GEN" -DCMAKE_BUILD_TYPE=Release -DDEEPINFER_BUILD_MINIMAL=ON
     -DDEEPINFER_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=$CUDA_ARCHS" -DDEEPINFER_WERROR=OFF)
[ -n "$NVCC" ] && CFG+=("-DCMAKE_CUDA_COMPILER=$NVCC")
if ! timeout 120 cmake "${CFG[@]}" > "$OUT/configure.log" 2>&1; then
  say "configure FAILED (configure.log):"; tail -20 "$OUT/configure.log" | tee -a "$OUT/summary.txt"
  exit 3
fi
say "configured ($GEN, archs $CUDA_ARCHS)"
if ! timeout 300 cmake --build "$BUILD_DIR" --target ops_cuda_test kernels_host_test -j "$JOBS" > "$OUT/build.log" 2>&1; then
  say "build FAILED (build.log):"; grep -E -m20 'error|Error' "$OUT/build.log" | tee -a "$OUT/summary.txt"
  exit 3
fi
say "built ops_cuda_test kernels_host_test"
"$BUILD_DIR/tests/ops/cuda/kernels_host_test" > "$OUT/kernels_host.log" 2>&1
say "kernels_host_test exit $?: $(tail -1 "$OUT/kernels_host.log")"
BIN="$BUILD_DIR/tests/ops/cuda/ops_cuda_test"
ARGS=()
[ -n "${FILTER:-}" ] && ARGS+=("--filter=$FILTER")

timeout 200 "$BIN" "${ARGS[@]}" > "$OUT/harness.log" 2>&1
RC=$?
say "harness exit $RC: $(tail -1 "$OUT/harness.log")"
grep -E 'FAIL|SKIP' "$OUT/harness.log" | head -40 | tee -a "$OUT/summary.txt"

if [ "${SKIP_PERF:-0}" != 1 ] && [ "$RC" != 77 ]; then
  timeout 150 "$BIN" --perf "${ARGS[@]}" > "$OUT/perf.log" 2>&1
  say "perf exit $?"
  cat "$OUT/perf.log" >> "$OUT/summary.txt"
fi
say "done"
exit "$RC"
