#!/usr/bin/env bash
# FlashMLA built from source beside us (issue 19's sparse-attention peer), from the carried
# .deps/flashmla.tar.xz (tools/gpu/make_flashmla_carry.sh): unpacked once into .deps/flashmla
# (a warm machine keeps it and its build), then built in place for sm_90a. Used by
# run_model_cuda.sh's `flashmla` stage and by run_groups.sh's background build.
#
#   tools/gpu/flashmla_build.sh SECONDS JOBS LOG   # exit: 3 without the archive, else the build's
set -u
cd "$(dirname "$0")/../.."
SECONDS_LIMIT="${1:?usage: $0 SECONDS JOBS LOG}" JOBS="${2:?}" LOG="${3:?}"
FM="$PWD/.deps/flashmla/src"
if [ ! -d "$FM" ]; then
  [ -f .deps/flashmla.tar.xz ] || exit 3
  mkdir -p .deps/flashmla && tar -C .deps/flashmla -xJf .deps/flashmla.tar.xz
  # No git and no network there: the CUTLASS headers came in the archive.
  sed -i 's/^subprocess.run(\["git", "submodule"/# &/' "$FM/setup.py"
fi
# CUTLASS includes <cuda/std/...>, which CUDA 13 keeps in include/cccl: nvcc finds it by itself,
# the host compiler (FlashMLA's api.cpp) does not (stop 46's first try failed there).
CCCL="${CUDA_HOME:-/usr/local/cuda}/include/cccl"
export CPLUS_INCLUDE_PATH="$CCCL${CPLUS_INCLUDE_PATH:+:$CPLUS_INCLUDE_PATH}"
cd "$FM" && FLASH_MLA_DISABLE_SM100=1 MAX_JOBS="$JOBS" NVCC_THREADS=2 \
  timeout "$SECONDS_LIMIT" python3 setup.py build_ext --inplace > "$LOG" 2>&1
