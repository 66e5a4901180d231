#!/usr/bin/env bash
# Builds and runs the C++ tests under the sanitizers (presets in CMakePresets.json; what each
# covers and the last results: docs/fuzzing.md, "Sanitizer builds"):
#   scripts/sanitize.sh asan   # unit, ops and numerics tests under ASan + UBSan (build/asan)
#   scripts/sanitize.sh tsan   # the threaded tests under ThreadSanitizer (build/tsan)
#   scripts/sanitize.sh all    # both (the default)
# Further arguments go to ctest (e.g. `scripts/sanitize.sh tsan -R runtime_test`). Needs the
# Debian packages that scripts/setup.sh installs (GCC or clang, CMake, Ninja, GoogleTest, ICU,
# nlohmann-json, CLI11, Boost), not its Python environment. Every preset runs even when an
# earlier one fails; the exit status is non-zero when any failed.
set -euo pipefail
DEEPINFER_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$DEEPINFER_ROOT"

which="${1:-all}"
[ $# -gt 0 ] && shift
case "$which" in
  asan | tsan) presets=("$which") ;;
  all) presets=(asan tsan) ;;
  *) echo "usage: scripts/sanitize.sh [asan|tsan|all] [ctest arguments...]" >&2; exit 2 ;;
esac

JOBS="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
failed=()
for preset in "${presets[@]}"; do
  start=$(date +%s)
  echo "[sanitize] $preset: configure and build (-j $JOBS)"
  if cmake --preset "$preset" >/dev/null && cmake --build --preset "$preset" -j "$JOBS"; then
    built=$(date +%s)
    echo "[sanitize] $preset: built in $((built - start)) s; running the tests"
    if ctest --preset "$preset" -j "$JOBS" "$@"; then
      echo "[sanitize] $preset: passed (build $((built - start)) s, tests $(($(date +%s) - built)) s)"
      continue
    fi
  fi
  echo "[sanitize] $preset: FAILED after $(($(date +%s) - start)) s" >&2
  failed+=("$preset")
done
if ((${#failed[@]})); then
  echo "[sanitize] failed: ${failed[*]}" >&2
  exit 1
fi
