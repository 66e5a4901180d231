#!/usr/bin/env bash
# Where an op's time goes on the GPU machine, kernel by kernel: builds ops_cuda_test (minimal
# CUDA tree, sm_90a) and runs its perf mode for PERF_FILTER under Nsight Systems (per-kernel
# time table) and Nsight Compute (NCU_KERNEL regex, NCU_COUNT launches after NCU_SKIP, the
# sections below; NCU_NAME_BASE: how NCU_KERNEL is matched, ncu's --kernel-name-base: function
# (default), demangled (template arguments included, e.g. NCU_KERNEL='StagedPart\)0' for one
# instantiation) or mangled), from the repository root:
#
#   PERF_FILTER=moe_experts NCU_KERNEL=grouped_mma tools/gpu/profile_ops.sh
#
# Output in $OUT: build.log, perf.log, nsys.txt, ncu.txt. Either profiler missing is reported,
# not fatal. ncu locks the SM clock (1.35 GHz on an H200): its durations are not the perf run's.
set -u
cd "$(dirname "$0")/../.."
OUT="${OUT:-$PWD/build/gpu-out}"
BUILD_DIR="${BUILD_DIR:-build/gpu}"
mkdir -p "$OUT"
STAGES=build tools/gpu/run_model_cuda.sh > "$OUT/build_stage.log" 2>&1 || { tail -30 "$OUT/build_stage.log"; exit 3; }
BIN="$BUILD_DIR/tests/ops/cuda/ops_cuda_test"
ARGS=(--perf "--filter=${PERF_FILTER:-moe_experts}")
timeout 200 "$BIN" "${ARGS[@]}" > "$OUT/perf.log" 2>&1; echo "perf exit $?"
find_tool() { command -v "$1" || ls /usr/local/cuda/bin/"$1" /opt/nvidia/*/bin/"$1" /usr/local/cuda/nsight*/bin/"$1" 2>/dev/null | head -1; }
NSYS="$(find_tool nsys)"; NCU="$(find_tool ncu)"
if [ -n "$NSYS" ]; then
  timeout 240 "$NSYS" profile -o "$OUT/prof" --force-overwrite true "$BIN" "${ARGS[@]}" > "$OUT/nsys_run.log" 2>&1
  timeout 120 "$NSYS" stats --report cuda_gpu_kern_sum --format column "$OUT/prof.nsys-rep" > "$OUT/nsys.txt" 2>&1
  rm -f "$OUT"/prof.nsys-rep "$OUT"/prof.sqlite
else echo "nsys: not found" > "$OUT/nsys.txt"; fi
if [ -n "$NCU" ] && [ -n "${NCU_KERNEL:-}" ]; then
  timeout 300 "$NCU" --kernel-name-base "${NCU_NAME_BASE:-function}" --kernel-name "regex:$NCU_KERNEL" --launch-skip "${NCU_SKIP:-0}" --launch-count "${NCU_COUNT:-2}" \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section InstructionStats \
    --section SchedulerStats --section WarpStateStats --section Occupancy --section MemoryWorkloadAnalysis \
    "$BIN" "${ARGS[@]}" > "$OUT/ncu.txt" 2>&1
else echo "ncu: not found or NCU_KERNEL unset" > "$OUT/ncu.txt"; fi
echo "done"
