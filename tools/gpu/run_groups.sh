#!/usr/bin/env bash
# Several run_model_cuda.sh runs in one device call, each with its own settings and its own
# folder of results, under one deadline (a call is at most 600 s, and what a cut-off run left in
# $OUT still comes back):
#
#   tools/gpu/run_groups.sh "NAME|VAR=value VAR='two words' ..." ...
#   # e.g. DEADLINE=540 tools/gpu/run_groups.sh \
#   #   "check|STAGES='build ops perf' FILTER=sample PERF_FILTER=sample" \
#   #   "ab|STAGES=ab AB_FLAG=--hc-dot-tokens=8 BATCHES=1,4,64 DRAFT_BATCHES=1 AB_ROUNDS=2"
#
# Each group runs `VAR=value ... tools/gpu/run_model_cuda.sh` with OUT=$OUT/NAME (its logs and
# summary.txt there), in order, while at least 40 s of DEADLINE (seconds from the start, default
# 575) are left; the group is given what is left as its time limit. They share BUILD_DIR, so the
# first group builds and the others find the build. $OUT/times.txt: each group's exit status
# and finishing second, then the card's clocks. At the end every file is packed into
# $OUT/results.tgz; times.txt and each $OUT/NAME/summary.txt stay beside it (PACK=0: not).
# With .deps/flashmla.tar.xz present (tools/gpu/make_flashmla_carry.sh, carried), FlashMLA is
# built in the background meanwhile by tools/gpu/flashmla_build.sh (FLASHMLA_BG=0: not; at most
# FLASHMLA_BG_S seconds, default 450, 6 jobs at low priority; stopped when the last group ends).
# A group whose settings name flashmla waits for it first (two builds in one folder would
# collide), and a later call on the same warm machine finds it built.
set -u
cd "$(dirname "$0")/../.."
OUT="${OUT:-$PWD/build/gpu-out}"
mkdir -p "$OUT"
T0=$(date +%s)
DEADLINE="${DEADLINE:-575}"
elapsed() { echo $(( $(date +%s) - T0 )); }
if [ "${FLASHMLA_BG:-1}" = 1 ] && [ -f .deps/flashmla.tar.xz ]; then
  ( nice tools/gpu/flashmla_build.sh "${FLASHMLA_BG_S:-450}" 6 "$OUT/flashmla_bg_build.log"
    echo "flashmla background build exit $? at $(elapsed) s" >> "$OUT/times.txt" ) &
fi
for group in "$@"; do
  name="${group%%|*}"
  settings="${group#*|}"
  [ "$settings" = "$group" ] && settings=""
  # The flashmla stage builds in the folder the background build uses: let that one finish.
  [[ "$settings" == *flashmla* ]] && wait
  left=$(( DEADLINE - $(elapsed) ))
  if [ "$left" -lt 40 ]; then
    echo "$name skipped: ${left} s left" >> "$OUT/times.txt"
    continue
  fi
  mkdir -p "$OUT/$name"
  # eval: the settings are shell words (quotes keep a value with spaces together).
  eval "env OUT=\"$OUT/$name\" $settings timeout $left tools/gpu/run_model_cuda.sh" \
    > "$OUT/$name/run.log" 2>&1
  echo "$name exit $? at $(elapsed) s" >> "$OUT/times.txt"
done
kill %1 2> /dev/null  # the background build, if still going
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv >> "$OUT/times.txt" 2> /dev/null
# The device tool brings back only a few files per call (stop 45 lost most of a group's logs to
# that limit): everything goes into $OUT/results.tgz, and only times.txt and each group's
# summary.txt stay beside it (PACK=0: leave the folders as they are).
if [ "${PACK:-1}" = 1 ]; then
  ( cd "$OUT" && tar czf /tmp/run_groups_results.tgz --exclude=results.tgz . ) &&
    find "$OUT" -mindepth 1 -type f ! -name times.txt ! -name summary.txt -delete &&
    mv /tmp/run_groups_results.tgz "$OUT/results.tgz"
fi
exit 0
