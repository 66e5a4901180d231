#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) with clang, AddressSanitizer and
# UndefinedBehaviorSanitizer in build/fuzz, and runs each for a while:
#
#   tools/fuzz/run.sh [--seconds N] [TARGET...]     # default 60 s each, every target
#
# A single input slower than 1 s is reported ("Slowest unit", a slow-unit-* file in
# build/fuzz/out) and one over 30 s ends the run as a timeout: both count as findings (the
# sanitizers and coverage make the code 5-10 times slower than a release build).
#
# New inputs that grow coverage go to build/fuzz/corpus/TARGET (merged with the committed seed
# corpus tests/fuzz/corpus/TARGET, which stays small); a crash leaves crash-* in build/fuzz/out.
# Commit a crashing input under tests/fuzz/corpus/TARGET with its fix: the corpus CTests
# (`ctest -R _corpus` in this build) then keep it fixed. Prints executions per target.
set -euo pipefail
cd "$(dirname "$0")/../.."
SECONDS_EACH=60
TARGETS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) SECONDS_EACH="$2"; shift 2 ;;
    *) TARGETS+=("$1"); shift ;;
  esac
done
BUILD=build/fuzz
CC=clang CXX=clang++ cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DDEEPINFER_FUZZ=ON -DDEEPINFER_BUILD_TESTS=OFF -DDEEPINFER_BUILD_BENCH=OFF -DDEEPINFER_CUDA=OFF >/dev/null
[ ${#TARGETS[@]} -eq 0 ] && TARGETS=(safetensors model_config tokenizer_json regex json_schema gbnf
  chat_messages dsml http_request)
cmake --build "$BUILD" --target "${TARGETS[@]}" -j "$(nproc)"
ROOT="$PWD"
mkdir -p "$BUILD/out"
for t in "${TARGETS[@]}"; do
  mkdir -p "$BUILD/corpus/$t"
  args=(-max_total_time="$SECONDS_EACH" -print_final_stats=1 -timeout=30 -report_slow_units=1)
  [ -f "tests/fuzz/dict/$t.dict" ] && args+=("-dict=$ROOT/tests/fuzz/dict/$t.dict")
  echo "== $t: $SECONDS_EACH s"
  (cd "$BUILD/out" && "$ROOT/$BUILD/tests/fuzz/$t" "${args[@]}" "$ROOT/$BUILD/corpus/$t" \
      "$ROOT/tests/fuzz/corpus/$t" 2>&1 |
    grep -E "stat::number_of_executed_units|stat::peak_rss_mb|ERROR|SUMMARY|Test unit written|Slowest unit|slow-unit|fuzz:" || true)
done
