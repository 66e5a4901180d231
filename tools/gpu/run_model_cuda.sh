#!/usr/bin/env bash
# The model on the GPU, in one command on a GPU machine, from the repository root:
#
#   tools/gpu/run_model_cuda.sh        # logs and results to $OUT (the device tool's folder)
#
# Stages (STAGES, default "build ops model bench hf"):
#   build  configure the minimal tree (DEEPINFER_BUILD_MINIMAL) for sm_90a and build
#          ops_cuda_test, model_cuda_test and decode_bench (-j16). The model needs nlohmann_json
#          headers: found by CMake, or at $NLOHMANN_INCLUDE (default .deps/cmake/include), and ICU
#          headers (the system's, or $ICU_ROOT, default .deps/icu). Carry .deps/carry.tar.xz, made
#          here by tools/gpu/make_carry.sh (unpacked into .deps/ first; never committed).
#   ops    the CUDA op harness (FILTER selects cases; default all)
#   perf   (not default) the op harness's perf mode, ops_cuda_test --perf (PERF_FILTER selects
#          ops by substring, e.g. topk; default all): perf.log; with the FP8 linears, their peer
#          torch._scaled_mm (bench/model_cuda/scaled_mm_peer.py): scaled_mm_peer.log / .csv
#   model  model_cuda_test: the whole model GPU vs CPU on the tiny reference checkpoints
#   bench  make the V4-Flash-shaped random checkpoint (tools/gpu/make_synthetic_v4.py,
#          SYNTH_LAYERS layers, default 4, in $SYNTH_DIR) and run decode_bench on it: the card's
#          copy bandwidth and FP8 / BF16 GEMM rates measured in the run, decode at BATCHES,
#          decode again at LONG_BATCHES (default 1,16) with LONG_CONTEXT (default 8192; 0 = off)
#          tokens in every sequence, the full-model (43-layer) estimate next to SGLang's
#          published figures (bench/README.md), and a PREFILL-token prefill; BENCH_TAIL lines
#          (default 45) of it go to summary.txt. LOAD_FORMAT=dummy: no checkpoint is written,
#          only its config.json (make_synthetic_v4.py --config-only), and decode_bench generates
#          the same layouts with random values on the GPU (--load-format dummy): any SYNTH_LAYERS
#          without a multi-GB file (the default, auto, writes and reads the checkpoint)
#   hf     the same shapes in Hugging Face transformers (bench/model_cuda/hf_peer.py)
#   bench41, hf41 (not default) the V4.1-Flash-shaped checkpoint and transformers main's V4.1
#          (bench41 honours LOAD_FORMAT=dummy too: config.json and tokenizer.json only)
#   engine the full tree (CLI, engine; needs ICU headers: the system's or $ICU_ROOT; CLI11 / nlohmann_json
#          from CMake or $DEPS_CMAKE, default .deps/cmake) and `deepinfer generate` on the
#          embedded default model: sampled text through the engine and greedy token ids through
#          the model, on the CPU and on the GPU (DEEPINFER_ACCELERATOR=nvidia / --backend cuda)
#   dp     (not default) data-parallel ranks on the GPU(s) through the engine: models/default,
#          DP_PROMPTS (default 32) greedy requests of 64 tokens, one rank vs DP_RANKS (default 2)
#          ranks on DP_DEVICES (default: 0,1,.. when the machine has enough GPUs, else every rank
#          on GPU 0); batch-invariant (DEEPINFER_BATCH_INVARIANT=1), so the token ids must be
#          equal whatever the ranks' batches; then tokens/s of both without it; dp.log, dp_*.json
#   spec   speculative decoding through the engine on the GPU: SPEC_MODEL (default models/default,
#          the trained V4.1) at SPEC_CONCURRENCY (default "1 4 16 64") requests, SPEC_CONFIGS (default
#          off vs DSpark / n-gram, fixed k (SPEC_K, default 5) and varlen; for the V4 path:
#          SPEC_MODEL=models/v4-small SPEC_CONFIGS="off mtp ngram mtp_varlen ngram_varlen");
#          SPEC_TEMPERATURE (default 0.7; 0 = greedy); SPEC_REPEATS rounds (default 1; median
#          tokens/s and the spread per configuration); batch-invariant bitwise checks on
#          models/v4-small (MTP, n-gram) and v41_tiny_a (DSpark);
#          spec.csv; spec_logs.tar.gz: each run's --stats and, for varlen runs, its per-step trace
#          (DEEPINFER_VARLEN_TRACE: spec_trace_N_CFG_rR.csv, the --warmup run's steps first)
#   draft  bench/model_cuda/draft_bench on SPEC_MODEL: one batched draft (DSpark, or V4's MTP
#          chain; CUDA graphs on and off) vs the decode and verify steps it rides on, at
#          DRAFT_BATCHES (default 1,16,64), with an op profile
#   ab     (not default) the A/B of one switch, same build, same machine: decode_bench on the
#          V4-Flash-shaped config (dummy weights, SYNTH_LAYERS, BATCHES; AB_PREFILL tokens of
#          prefill, default none; AB_LONG_CONTEXT tokens of context for decode at AB_LONG_BATCHES,
#          default none: the sparse attention's full 640 keys) and draft_bench
#          on SPEC_MODEL (default models/v4-small, k = SPEC_K, DRAFT_BATCHES), each plain (A) and
#          with AB_FLAG (a flag both benches take, e.g. --ungrouped-linear, --unfused-small-ops)
#          and AB_ENV (e.g. DEEPINFER_CUDA_PDL=0) (B), alternating AB_ROUNDS times (default 2);
#          ab.txt / ab.csv: per batch and metric the median of each side, B/A and every round's
#          value (bench/model_cuda/ab_summary.py). It replaces stop 36's `pdl` stage: PDL's A/B
#          is AB_ENV=DEEPINFER_CUDA_PDL=0, the fused act-quant GEMV's AB_FLAG=--fused-act-quant.
#          AB_PATCH (a patch file in the tree, paths from its root, e.g. `git diff BASE -- src
#          tests bench > ab.patch`, left untracked so that it travels): A is then the tree with
#          the patch reverse-applied, copied to AB_TREE (default /tmp/ab_a) and built there in its
#          own build folder, so this tree's BUILD_DIR never holds objects of the other version
#          (stop 43's stale-object trap, below); B is this tree, with AB_FLAG / AB_ENV if given
#   replay bench/replay/replay_bench --backend cuda on models/default (SWA bounded replay: prefill
#          speed-up, KL, greedy agreement) over REPLAY_PROMPT (default .deps/replay_prompt.txt from
#          the carry archive: the first 30,000 characters of the default model's held-out text),
#          keeps REPLAY_KEEP (default 140,190,512); replay.csv, replay.log
#   flashmla (not default; first run in stop 46) FlashMLA built from source beside us, the sparse
#          attention peer of issue 19: carry .deps/flashmla.tar.xz (tools/gpu/make_flashmla_carry.sh),
#          unpacked once into .deps/flashmla (a warm machine keeps its build) and built for sm_90a
#          by tools/gpu/flashmla_build.sh
#          (FLASH_MLA_DISABLE_SM100=1, FLASHMLA_BUILD_S seconds, default 500: a cold build may
#          need a second call), then bench/model_cuda/flashmla_peer.py at FLASHMLA_BATCHES
#          (default 2,64,128,256; 2 queries per sequence, 512 + 128 keys) against our
#          `ops_cuda_test --perf --filter=sparse_attention` at M = 2 x batch; flashmla.csv,
#          flashmla_ratio.csv (ours / FlashMLA), flashmla_build.log
# Several runs of this script in one device call, each with its own settings and results
# folder, under one deadline: tools/gpu/run_groups.sh.
# An A/B across two source versions: stage ab with AB_PATCH, which builds the other side in its
# own copy and build folder. Never patch this tree and rebuild BUILD_DIR for it: the device keeps
# build outputs between calls of a warm machine and the tree it receives keeps this machine's
# file times, so objects built there from patched sources can look newer than the sources of
# the next call and be kept (stop 43: a stale cuda_ops.cc.o, an illegal address).
# Each stage has a time limit. Logs: env.log, configure.log, build.log, harness.log, model.log,
# synth.log, bench.log, bench.json, hf.log, hf.json, summary.txt.
set -u
cd "$(dirname "$0")/../.."
OUT="${OUT:-$PWD/build/gpu-out}"
BUILD_DIR="${BUILD_DIR:-build/gpu}"
STAGES="${STAGES:-build ops model bench hf}"
NLOHMANN_INCLUDE="${NLOHMANN_INCLUDE:-$PWD/.deps/cmake/include}"
SYNTH_LAYERS="${SYNTH_LAYERS:-4}"
SYNTH_DIR="${SYNTH_DIR:-/tmp/v4_flash_synth_$SYNTH_LAYERS}"
BATCHES="${BATCHES:-1,16,128,256}"
LOAD_FORMAT="${LOAD_FORMAT:-auto}"  # dummy: bench stages generate the weights on the GPU
HF_BATCHES="${HF_BATCHES:-1,16}"
mkdir -p "$OUT" "$BUILD_DIR"
# The carried dependencies, packed by tools/gpu/make_carry.sh (headers, ICU, the replay prompt).
[ -f .deps/carry.tar.xz ] && tar -C .deps -xJf .deps/carry.tar.xz
T0=$(date +%s)
touch "$OUT/summary.txt"
say() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$OUT/summary.txt"; }
# ICU (the tokenizer, which the model needs for V4.1's Engram token map): the system's headers,
# else a carried copy at $ICU_ROOT (default .deps/icu, made by tools/gpu/make_icu_headers.sh for
# the machine's libicuuc major version; its lib/ link is made here).
ICU_ROOT="${ICU_ROOT:-$PWD/.deps/icu}"
ICU_ARGS=()
if [ ! -f /usr/include/unicode/utypes.h ] && [ -f "$ICU_ROOT/include/unicode/utypes.h" ]; then
  LIBICU="$(ls /usr/lib/x86_64-linux-gnu/libicuuc.so.[0-9]* 2>/dev/null | head -1)"
  if [ -n "$LIBICU" ]; then
    mkdir -p "$ICU_ROOT/lib" && ln -sf "$LIBICU" "$ICU_ROOT/lib/libicuuc.so"
    ICU_ARGS=("-DICU_ROOT=$ICU_ROOT")
  fi
fi
has() { [[ " $STAGES " == *" $1 "* ]]; }
# The full tree's `deepinfer` binary with the CUDA backend (stages engine and spec): $BIN.
FULL="${FULL_BUILD_DIR:-build/gpu-full}"
BIN="$FULL/tools/cli/deepinfer"
build_engine_bin() {
  timeout 120 cmake -S . -B "$FULL" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDEEPINFER_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90a -DDEEPINFER_BUILD_TESTS=OFF -DDEEPINFER_BUILD_BENCH=OFF \
    -DDEEPINFER_BUILD_PYTHON=OFF "-DCMAKE_PREFIX_PATH=${DEPS_CMAKE:-$PWD/.deps/cmake}" \
    "${ICU_ARGS[@]}" > "$OUT/engine_configure.log" 2>&1 &&
  timeout 300 cmake --build "$FULL" --target deepinfer_bin -j "${JOBS:-16}" > "$OUT/engine_build.log" 2>&1
}
export PYTHONUNBUFFERED=1

NVCC="$(command -v nvcc || true)"
[ -z "$NVCC" ] && [ -x /usr/local/cuda/bin/nvcc ] && NVCC=/usr/local/cuda/bin/nvcc
# minimal_cfg SRC BUILD: CFG = the configure arguments of the minimal CUDA tree at SRC.
minimal_cfg() {
  local gen="Unix Makefiles"; command -v ninja >/dev/null 2>&1 && gen=Ninja
  CFG=(-S "$1" -B "$2" -G "$gen" -DCMAKE_BUILD_TYPE=Release -DDEEPINFER_BUILD_MINIMAL=ON
       -DDEEPINFER_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DDEEPINFER_WERROR=OFF
       "-DDEEPINFER_NLOHMANN_INCLUDE=$NLOHMANN_INCLUDE" "${ICU_ARGS[@]}")
  [ -n "$NVCC" ] && CFG+=("-DCMAKE_CUDA_COMPILER=$NVCC")
}

if has build; then
  { nvidia-smi 2>&1 | head -15; [ -n "$NVCC" ] && "$NVCC" --version; cmake --version | head -1; } \
    > "$OUT/env.log" 2>&1
  minimal_cfg . "$BUILD_DIR"
  if ! timeout 120 cmake "${CFG[@]}" > "$OUT/configure.log" 2>&1; then
    say "configure FAILED"; tail -20 "$OUT/configure.log" | tee -a "$OUT/summary.txt"; exit 3
  fi
  if ! timeout 360 cmake --build "$BUILD_DIR" --target ops_cuda_test model_cuda_test decode_bench draft_bench \
       -j "${JOBS:-16}" > "$OUT/build.log" 2>&1; then
    say "build FAILED"; grep -E -m20 'error' "$OUT/build.log" | tee -a "$OUT/summary.txt"; exit 3
  fi
  say "built"
fi
if has ops; then
  HARNESS="$BUILD_DIR/tests/ops/cuda/ops_cuda_test"
  if [ -n "${FILTER:-}" ]; then
    timeout 200 "$HARNESS" "--filter=$FILTER" > "$OUT/harness.log" 2>&1
    say "ops_cuda_test exit $?: $(tail -1 "$OUT/harness.log")"
  else
    # Every case in a process of its own, OPS_JOBS at once: the CPU oracle is single-threaded
    # and the whole harness in one process outgrew 200 s in stop 45 (the larger sample rows).
    mkdir -p "$OUT/ops"
    "$HARNESS" --list | sed 's/ (.*//' > "$OUT/ops/cases.txt"
    xargs -P "${OPS_JOBS:-12}" -I{} sh -c 'timeout 240 "$0" --only={} > "$1/{}.log" 2>&1; echo "{} $?" >> "$1/exit.txt"' \
      "$HARNESS" "$OUT/ops" < "$OUT/ops/cases.txt"
    cat "$OUT"/ops/*.log > "$OUT/harness.log"
    say "ops_cuda_test by case: $(python3 tools/gpu/ops_shard_summary.py "$OUT/ops")"
  fi
fi
if has perf; then
  ARGS=(--perf); [ -n "${PERF_FILTER:-}" ] && ARGS+=("--filter=$PERF_FILTER")
  timeout 300 "$BUILD_DIR/tests/ops/cuda/ops_cuda_test" "${ARGS[@]}" > "$OUT/perf.log" 2>&1
  say "ops_cuda_test --perf exit $?"
  grep -E "rank/radix|MISMATCH" "$OUT/perf.log" | tee -a "$OUT/summary.txt"
  # The FP8 linears' peer in the same call: torch._scaled_mm with the same block scaling.
  if [ -z "${PERF_FILTER:-}" ] || [[ "${PERF_FILTER:-}" == *"linear fp8"* ]]; then
    timeout 120 python3 bench/model_cuda/scaled_mm_peer.py --csv "$OUT/scaled_mm_peer.csv" \
      > "$OUT/scaled_mm_peer.log" 2>&1
    say "scaled_mm_peer exit $?"; head -1 "$OUT/scaled_mm_peer.log" | tee -a "$OUT/summary.txt"
  fi
fi
if has model; then
  timeout 240 "$BUILD_DIR/tests/numerics/cuda/model_cuda_test" "$PWD" > "$OUT/model.log" 2>&1
  say "model_cuda_test exit $?: $(tail -1 "$OUT/model.log")"
  grep -E "FAIL" "$OUT/model.log" | head -20 | tee -a "$OUT/summary.txt"
fi
if has bench; then
  if [ "$LOAD_FORMAT" = dummy ]; then
    [ -f "$SYNTH_DIR/config.json" ] || python3 tools/gpu/make_synthetic_v4.py "$SYNTH_DIR" \
      --layers "$SYNTH_LAYERS" --config-only > "$OUT/synth.log" 2>&1
    say "dummy weights: config.json only in $SYNTH_DIR ($SYNTH_LAYERS layers)"
  elif [ ! -f "$SYNTH_DIR/model.safetensors.index.json" ]; then
    timeout 300 python3 tools/gpu/make_synthetic_v4.py "$SYNTH_DIR" --layers "$SYNTH_LAYERS" \
      > "$OUT/synth.log" 2>&1
    say "synthetic checkpoint exit $?: $(tail -1 "$OUT/synth.log")"
  fi
  # 420 s: the long-context prefill (LONG_BATCHES sequences of LONG_CONTEXT tokens) comes on top
  # of the batches and the prefill.
  timeout 420 "$BUILD_DIR/bench/model_cuda/decode_bench" --model "$SYNTH_DIR" --batches "$BATCHES" \
    --prefill "${PREFILL:-4096}" --long-context "${LONG_CONTEXT:-8192}" \
    --long-batches "${LONG_BATCHES:-1,16}" --out "$OUT/bench.json" \
    --load-format "$LOAD_FORMAT" ${BENCH_ARGS:-} \
    > "$OUT/bench.log" 2>&1
  say "decode_bench exit $?"
  grep -v "^{" "$OUT/bench.log" | grep -v -E ' calls +[0-9.]+ ms +[0-9.]+%$' | tail -${BENCH_TAIL:-45} \
    | tee -a "$OUT/summary.txt"
fi
# bench41 (not in the default STAGES): the same on the V4.1-Flash-shaped random checkpoint
# (make_synthetic_v41.py, SYNTH_LAYERS layers, in $V41_SYNTH_DIR; ~31 GiB at 4 layers), CUDA
# graphs on (replayed vs replay off in the same run), the Engram lookup's share per step.
if has bench41; then
  V41_SYNTH_DIR="${V41_SYNTH_DIR:-/tmp/v41_flash_synth_$SYNTH_LAYERS}"
  if [ "$LOAD_FORMAT" = dummy ]; then
    [ -f "$V41_SYNTH_DIR/config.json" ] || python3 tools/gpu/make_synthetic_v41.py \
      "$V41_SYNTH_DIR" --layers "$SYNTH_LAYERS" --config-only > "$OUT/synth41.log" 2>&1
    say "dummy weights: config.json and tokenizer.json only in $V41_SYNTH_DIR"
  elif [ ! -f "$V41_SYNTH_DIR/model.safetensors.index.json" ]; then
    timeout 400 python3 tools/gpu/make_synthetic_v41.py "$V41_SYNTH_DIR" --layers "$SYNTH_LAYERS" \
      > "$OUT/synth41.log" 2>&1
    say "synthetic V4.1 checkpoint exit $?: $(tail -1 "$OUT/synth41.log")"
  fi
  timeout 300 "$BUILD_DIR/bench/model_cuda/decode_bench" --model "$V41_SYNTH_DIR" \
    --batches "$BATCHES" --prefill "${PREFILL:-4096}" --out "$OUT/bench41.json" \
    --load-format "$LOAD_FORMAT" ${BENCH41_ARGS:-} \
    > "$OUT/bench41.log" 2>&1
  say "decode_bench (V4.1) exit $?"
  grep -v "^{" "$OUT/bench41.log" | tail -${BENCH_TAIL:-16} | tee -a "$OUT/summary.txt"
fi
if has hf; then
  [ -f "$SYNTH_DIR/config.json" ] || python3 tools/gpu/make_synthetic_v4.py "$SYNTH_DIR" \
    --layers "$SYNTH_LAYERS" --config-only
  timeout 300 python3 bench/model_cuda/hf_peer.py --config "$SYNTH_DIR/config.json" \
    --batches "$HF_BATCHES" --prefill "${PREFILL:-4096}" --out "$OUT/hf.json" > "$OUT/hf.log" 2>&1
  say "hf_peer exit $?"
  grep -v '^{' "$OUT/hf.log" | tail -8 | tee -a "$OUT/summary.txt"
fi
# hf41 (not in the default STAGES): transformers main's deepseek_v41 as the V4.1 peer
# (bench/model_cuda/hf_peer_v41.py) on the V4.1-Flash-shaped synthetic config
# (make_synthetic_v41.py --config-only, SYNTH_LAYERS layers, in $V41_SYNTH_DIR). Its model is a
# wheel the caller carries in .deps/wheels (built from transformers main's source, never
# committed: docs/cuda_backend.md), installed offline into a venv over the system packages
# (else the user site, else unpacked onto PYTHONPATH). hf41_install.log, hf41.log, hf41.json.
if has hf41; then
  V41_SYNTH_DIR="${V41_SYNTH_DIR:-/tmp/v41_flash_synth_$SYNTH_LAYERS}"
  WHL41="$(ls "$PWD"/.deps/wheels/transformers_deepseek_v41_peer-*.whl 2>/dev/null | tail -1)"
  if [ -z "$WHL41" ]; then
    say "hf41: skipped, no .deps/wheels/transformers_deepseek_v41_peer-*.whl (docs/cuda_backend.md)"
  else
    PY41=python3; PP41="${PYTHONPATH:-}"
    V41PY=/tmp/hf41-venv/bin/python  # sees torch / transformers only if python3 is no venv itself
    { python3 -m venv --system-site-packages /tmp/hf41-venv && "$V41PY" -c "import torch, transformers" &&
      "$V41PY" -m pip install --no-deps --no-index --force-reinstall "$WHL41" && PY41="$V41PY"; } \
      > "$OUT/hf41_install.log" 2>&1 ||
    python3 -m pip install --user --no-deps --no-index --force-reinstall "$WHL41" >> "$OUT/hf41_install.log" 2>&1 ||
    { rm -rf /tmp/hf41-peer && python3 -m zipfile -e "$WHL41" /tmp/hf41-peer && PP41="/tmp/hf41-peer${PP41:+:$PP41}"; }
    [ -f "$V41_SYNTH_DIR/config.json" ] || python3 tools/gpu/make_synthetic_v41.py "$V41_SYNTH_DIR" \
      --layers "$SYNTH_LAYERS" --config-only >> "$OUT/hf41_install.log" 2>&1
    env ${PP41:+PYTHONPATH="$PP41"} timeout 420 "$PY41" bench/model_cuda/hf_peer_v41.py \
      --config "$V41_SYNTH_DIR/config.json" --batches "$HF_BATCHES" --prefill "${PREFILL:-4096}" \
      --out "$OUT/hf41.json" ${HF41_ARGS:-} > "$OUT/hf41.log" 2>&1
    say "hf_peer_v41 exit $?"
    grep -v '^{' "$OUT/hf41.log" | tail -10 | tee -a "$OUT/summary.txt"
  fi
fi
if has engine; then
  if [ ! -f /usr/include/unicode/utypes.h ] && [ ${#ICU_ARGS[@]} -eq 0 ]; then
    say "engine: skipped, no ICU headers on this machine (carry them at \$ICU_ROOT)"
  else
    if ! build_engine_bin; then
      say "engine build FAILED"; grep -E -m10 'error|Error' "$OUT/engine_build.log" "$OUT/engine_configure.log" | tee -a "$OUT/summary.txt"
    else
      for acc in cpu nvidia; do
        DEEPINFER_ACCELERATOR=$acc timeout 120 "$BIN" generate --model models/default \
          --prompt "In the beginning" --prompt "And God said" --prompt "The word" \
          --max-tokens 48 --temperature 0.7 --seed 1 --json > "$OUT/engine_$acc.json" 2>&1
        say "engine $acc exit $?"
      done
      for b in opt cuda; do
        timeout 120 "$BIN" generate --model models/default --prompt-ids 5,17,42,99,123 \
          --max-tokens 64 --temperature 0 --ignore-eos --json --backend $b > "$OUT/greedy_$b.json" 2>&1
      done
      cmp -s "$OUT/engine_cpu.json" "$OUT/engine_nvidia.json" && say "engine: sampled outputs identical cpu vs gpu" || say "engine: sampled outputs DIFFER cpu vs gpu"
      # The executor's gap on the GPU: GAP_PROMPTS requests decoding together, asynchronous
      # scheduling vs synchronous (the per-step split is printed by --stats).
      for i in $(seq 1 "${GAP_PROMPTS:-64}"); do echo "Story $i: once upon a time"; done > "$OUT/gap_prompts.txt"
      # eager: asynchronous, CUDA graphs off (DEEPINFER_CUDA_GRAPH_MAX_ROWS=0), for the A/B.
      for mode in async sync eager; do
        flag=""; [ $mode = sync ] && flag="--sync-scheduling"
        rows=256; [ $mode = eager ] && rows=0
        DEEPINFER_CUDA_GRAPH_MAX_ROWS=$rows timeout 180 "$BIN" generate --model models/default \
          --prompts-file "$OUT/gap_prompts.txt" --max-tokens 128 --temperature 0.7 --seed 1 \
          --ignore-eos --json --stats --backend cuda $flag > "$OUT/gap_$mode.json" 2> "$OUT/gap_$mode.log"
        say "engine gap $mode exit $?: $(grep -E 'steps; per step' "$OUT/gap_$mode.log")"
        grep -E 'tokens/s|CUDA graph|KV pages' "$OUT/gap_$mode.log" | tee -a "$OUT/summary.txt"
      done
      cmp -s "$OUT/gap_async.json" "$OUT/gap_sync.json" && say "engine: async == sync outputs" || say "engine: async and sync outputs DIFFER"
      cmp -s "$OUT/gap_async.json" "$OUT/gap_eager.json" && say "engine: graphs == eager outputs" || say "engine: graphs and eager outputs differ (padded rows change kernel choices)"
      python3 - "$OUT" <<'PY' | tee -a "$OUT/summary.txt"
import json, sys
o = sys.argv[1]
a = json.load(open(o + "/greedy_opt.json"))["token_ids"]
b = json.load(open(o + "/greedy_cuda.json"))["token_ids"]
same = sum(x == y for x, y in zip(a, b))
print(f"greedy direct path: {same}/{len(a)} token ids equal cpu vs gpu")
PY
    fi
  fi
fi
if has dp; then
  build_engine_bin ||
    { say "dp: engine build FAILED"; grep -E -m10 'error|Error' "$OUT/engine_build.log" | tee -a "$OUT/summary.txt"; }
  RANKS="${DP_RANKS:-2}"
  NGPU=$(nvidia-smi -L 2>/dev/null | wc -l)
  if [ -n "${DP_DEVICES:-}" ]; then DEVS="$DP_DEVICES"
  elif [ "$NGPU" -ge "$RANKS" ]; then DEVS=$(seq -s, 0 $((RANKS - 1)))
  else DEVS=$(printf '0%.0s,' $(seq 1 "$RANKS")); DEVS=${DEVS%,}; fi
  for i in $(seq 1 "${DP_PROMPTS:-32}"); do echo "Story $i: once upon a time"; done > "$OUT/dp_prompts.txt"
  dp_run() {  # dp_run NAME INVARIANT [flags]: one generate over the prompts, JSON + stats
    local name=$1 inv=$2; shift 2
    DEEPINFER_BATCH_INVARIANT=$inv timeout 180 "$BIN" generate --model models/default \
      --prompts-file "$OUT/dp_prompts.txt" --max-tokens 64 --temperature 0 --ignore-eos --json \
      --stats --backend cuda "$@" > "$OUT/dp_$name.json" 2> "$OUT/dp_$name.log"
    say "dp $name exit $?: $(grep -E -m1 'tokens/s' "$OUT/dp_$name.log")"
  }
  say "dp: $RANKS ranks on GPUs $DEVS ($NGPU GPU(s) on this machine)"
  dp_run one_inv 1
  dp_run ranks_inv 1 --data-parallel-size "$RANKS" --cuda-devices "$DEVS"
  dp_run one 0
  dp_run ranks 0 --data-parallel-size "$RANKS" --cuda-devices "$DEVS"
  python3 - "$OUT" <<'PY' | tee -a "$OUT/summary.txt" "$OUT/dp.log"
import json, sys
o = sys.argv[1]
def ids(name):
    try:  # one JSON object per prompt, in prompt order
        return [json.loads(l)["token_ids"] for l in open(f"{o}/dp_{name}.json") if l.strip()]
    except Exception:
        return None
a, b = ids("one_inv"), ids("ranks_inv")
if a is None or b is None:
    print("dp: batch-invariant token ids MISSING (see dp_*.log)")
else:
    same = sum(x == y for x, y in zip(a, b))
    print(f"dp: batch-invariant token ids equal one rank vs ranks: {same}/{len(a)} requests")
PY
fi
if has ab; then
  [ -f "$SYNTH_DIR/config.json" ] || python3 tools/gpu/make_synthetic_v4.py "$SYNTH_DIR" \
    --layers "$SYNTH_LAYERS" --config-only > "$OUT/synth.log" 2>&1
  A_BENCH="$BUILD_DIR/bench/model_cuda"
  if [ -n "${AB_PATCH:-}" ]; then  # A: this tree without the patch, in its own copy and build
    AT="${AB_TREE:-/tmp/ab_a}" AP="$(realpath "$AB_PATCH")"
    rm -rf "$AT" && mkdir -p "$AT"
    tar --exclude=./build --exclude=./.deps --exclude=./.venv --exclude=./.git -cf - . |
      tar -x -C "$AT"
    if ! (cd "$AT" && patch -R -p1 < "$AP") > "$OUT/ab_patch.log" 2>&1; then
      say "ab: the patch does not reverse-apply (ab_patch.log)"; exit 3
    fi
    minimal_cfg "$AT" "$AT/build"
    if ! { timeout 120 cmake "${CFG[@]}" > "$OUT/ab_configure.log" 2>&1 &&
           timeout 360 cmake --build "$AT/build" --target decode_bench draft_bench \
             -j "${JOBS:-16}" > "$OUT/ab_build.log" 2>&1; }; then
      say "ab: building A FAILED (ab_configure.log, ab_build.log)"; exit 3
    fi
    A_BENCH="$AT/build/bench/model_cuda"
  fi
  say "ab: B = ${AB_PATCH:+the tree with $AB_PATCH }${AB_FLAG:-} ${AB_ENV:-} (A: ${AB_PATCH:+without it, }neither)"
  for round in $(seq 1 "${AB_ROUNDS:-2}"); do
    for side in a b; do
      flag=(); envs=(); bench="$A_BENCH"
      if [ "$side" = b ]; then
        read -r -a flag <<< "${AB_FLAG:-}"
        read -r -a envs <<< "${AB_ENV:-}"
        bench="$BUILD_DIR/bench/model_cuda"
      fi
      env "${envs[@]}" timeout 150 "$bench/decode_bench" --model "$SYNTH_DIR" \
        --batches "$BATCHES" --load-format dummy --long-context "${AB_LONG_CONTEXT:-0}" \
        --long-batches "${AB_LONG_BATCHES:-1,16}" --prefill "${AB_PREFILL:-0}" \
        --out "$OUT/ab_decode_${side}_$round.json" "${flag[@]}" > "$OUT/ab_decode_${side}_$round.log" 2>&1
      say "ab: decode_bench $side round $round exit $?"
      env "${envs[@]}" timeout 150 "$bench/draft_bench" \
        --model "${SPEC_MODEL:-models/v4-small}" --batches "${DRAFT_BATCHES:-1,16,64}" \
        --k "${SPEC_K:-3}" --out "$OUT/ab_draft_${side}_$round.json" "${flag[@]}" \
        > "$OUT/ab_draft_${side}_$round.log" 2>&1
      say "ab: draft_bench $side round $round exit $?"
    done
  done
  python3 bench/model_cuda/ab_summary.py "$OUT" --csv "$OUT/ab.csv" > "$OUT/ab.txt" 2>&1
  tee -a "$OUT/summary.txt" < "$OUT/ab.txt"
fi
if has spec; then
  # Speculative decoding on the GPU through the engine (`deepinfer generate --backend cuda`): the
  # embedded default model at SPEC_CONCURRENCY requests, no speculation (the peer) vs MTP and
  # n-gram drafting, fixed k and varlen; outputs must be identical. Builds the engine's binary
  # (incremental after the engine stage). Every configuration runs its requests once untimed
  # (--warmup): without it the plain peer paid its CUDA graph captures inside the timed run while
  # varlen's start-up profile had already warmed them (2026-12-03: a varlen engine that drafted
  # nothing read 1.14-1.29x "plain").
  build_engine_bin ||
    { say "spec: engine build FAILED"; grep -E -m10 'error|Error' "$OUT/engine_build.log" | tee -a "$OUT/summary.txt"; }
  K="${SPEC_K:-5}"
  spec_prompts() {  # spec_prompts N: N prompts, one per line, into $OUT/spec_prompts_N.txt
    python3 - "$1" > "$OUT/spec_prompts_$1.txt" <<'PY'
import sys
p = ["In the beginning God created the heaven and the earth.", "And it came to pass",
     "The law of the Lord is perfect", "Chapter 1.", "And God said,", "Blessed is the man",
     "Now these are the names", "And the LORD spake unto Moses, saying,"]
for i in range(int(sys.argv[1])): print(p[i % len(p)])
PY
  }
  # SPEC_REPEATS rounds (default 1), each running every configuration once, so a drift of the card
  # (clocks, heat) reaches all alike; the table gives each configuration's median tokens/s and
  # its spread over the rounds (a 64-request run lasts ~0.3 s: one run moves by +-15 %).
  for n in ${SPEC_CONCURRENCY:-1 4 16 64}; do
    spec_prompts "$n"
    for round in $(seq 1 "${SPEC_REPEATS:-1}"); do
    for cfg in ${SPEC_CONFIGS:-off dspark ngram dspark_varlen ngram_varlen}; do
      # cfg = method[_varlen][_residual] (_residual: residual acceptance for these seeded
      # requests too, so its outputs differ from off by design: "same" reads NO).
      method="${cfg%%_*}"; varlen=0; [[ "$cfg" == *_varlen* ]] && varlen=1
      acceptance=identical; [[ "$cfg" == *_residual* ]] && acceptance=residual-always
      k=$K; [ "$method" = off ] && k=0
      # varlen's per-step trace (docs/speculative.md, "The varlen trace"), into spec_logs.tar.gz
      trace=""; [ "$varlen" = 1 ] && trace="$OUT/spec_trace_${n}_${cfg}_r$round.csv"
      DEEPINFER_VARLEN_TRACE="$trace" DEEPINFER_ENABLE_MTP_VARLEN=$varlen timeout 120 "$BIN" generate --model "${SPEC_MODEL:-models/default}" \
        --prompts-file "$OUT/spec_prompts_$n.txt" --max-tokens "${SPEC_TOKENS:-128}" \
        --temperature "${SPEC_TEMPERATURE:-0.7}" --seed 1 --ignore-eos --json --stats --backend cuda --warmup \
        --speculative-method "$method" --num-speculative-tokens "$k" \
        --speculative-acceptance "$acceptance" \
        > "$OUT/spec_${n}_${cfg}_r$round.json" 2> "$OUT/spec_${n}_${cfg}_r$round.log"
      echo "exit $?" >> "$OUT/spec_${n}_${cfg}_r$round.log"
    done
    done
  done
  # On the GPU a row's logits depend on the step's shape unless DEEPINFER_BATCH_INVARIANT=1 (the
  # kernels then do not depend on the row count): the bitwise check runs in that mode, on four
  # requests (their prompts made here whatever SPEC_CONCURRENCY is: a missing prompts file
  # failed both runs alike, and their empty outputs compared equal).
  spec_prompts 4
  for cfg in off mtp ngram; do
    k=$K; [ "$cfg" = off ] && k=0
    DEEPINFER_BATCH_INVARIANT=1 timeout 120 "$BIN" generate --model models/v4-small \
      --prompts-file "$OUT/spec_prompts_4.txt" --max-tokens 64 --temperature 0.7 --seed 1 \
      --ignore-eos --json --backend cuda --speculative-method "$cfg" --num-speculative-tokens "$k" \
      > "$OUT/spec_inv_$cfg.json" 2> "$OUT/spec_inv_$cfg.log"
  done
  for cfg in mtp ngram; do
    [ -s "$OUT/spec_inv_off.json" ] && cmp -s "$OUT/spec_inv_off.json" "$OUT/spec_inv_$cfg.json" && say "spec: batch-invariant $cfg == off, bitwise" || say "spec: batch-invariant $cfg DIFFERS from off"
  done
  # DeepSeek-V4.1's DSpark drafter through the engine on the GPU (tiny checkpoint, token ids).
  for cfg in off dspark; do
    k=$K; [ "$cfg" = off ] && k=0
    DEEPINFER_BATCH_INVARIANT=1 timeout 60 "$BIN" generate --model tests/data/model/v41_tiny_a/official_bf16 \
      --prompt-ids 5,17,42,99,123,7,7,8 --max-tokens 48 --temperature 0.7 --seed 3 --ignore-eos \
      --json --stats --backend cuda --speculative-method "$cfg" --num-speculative-tokens "$k" \
      > "$OUT/spec_v41_$cfg.json" 2> "$OUT/spec_v41_$cfg.log"
  done
  [ -s "$OUT/spec_v41_off.json" ] && cmp -s "$OUT/spec_v41_off.json" "$OUT/spec_v41_dspark.json" && say "spec: V4.1 DSpark == off, bitwise (batch-invariant)" || say "spec: V4.1 DSpark DIFFERS from off"
  grep -h "speculative decoding" "$OUT/spec_v41_dspark.log" | tee -a "$OUT/summary.txt"
  python3 - "$OUT" "$K" ${SPEC_CONFIGS:-off dspark ngram dspark_varlen ngram_varlen} <<'PY' | tee -a "$OUT/summary.txt"
import glob, re, statistics, sys
out, k, configs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
rows = ["requests,config,tok_s,plain_tok_s,ratio,acceptance_length,ceiling,steps,identical,"
        "rounds,tok_s_min,tok_s_max"]
print(f"{'requests':>8} {'config':>13} {'tok/s':>9} {'plain':>9} {'ratio':>6} {'accept':>7} "
      f"{'steps':>6} same  rounds: tok/s min-max")
for n in sorted({int(m.group(1)) for f in glob.glob(out + '/spec_*_off_r1.log')
                 if (m := re.search(r'spec_(\d+)_off', f))}):
    def stat(cfg):  # median tokens/s over the rounds; the rest from round 1
        rates = []
        for log_path in sorted(glob.glob(f"{out}/spec_{n}_{cfg}_r*.log")):
            m = re.search(r"([\d.]+) tokens/s", open(log_path).read())
            rates.append(float(m.group(1)) if m else 0.0)
        log = open(f"{out}/spec_{n}_{cfg}_r1.log").read()
        a = re.search(r"acceptance length ([\d.]+)", log)
        st = re.search(r"(\d+) steps;", log)
        return (statistics.median(rates) if rates else 0.0, float(a.group(1)) if a else 1.0,
                int(st.group(1)) if st else 0, open(f"{out}/spec_{n}_{cfg}_r1.json").read(), rates)
    plain = stat("off")
    for cfg in configs:
        r, a, steps, text, rates = stat(cfg)
        same = text == plain[3]
        ratio = r / plain[0] if plain[0] else 0
        lo, hi = (min(rates), max(rates)) if rates else (0.0, 0.0)
        print(f"{n:>8} {cfg:>13} {r:>9.1f} {plain[0]:>9.1f} {ratio:>6.2f} {a:>7.2f} {steps:>6} "
              f"{'yes' if same else 'NO ':3}  {len(rates)}: {lo:.0f}-{hi:.0f}")
        rows.append(f"{n},{cfg},{r:.1f},{plain[0]:.1f},{ratio:.3f},{a:.3f},{k + 1 if cfg != 'off' else 1},"
                    f"{steps},{int(same)},{len(rates)},{lo:.1f},{hi:.1f}")
open(out + "/spec.csv", "w").write("\n".join(rows) + "\n")
PY
  tar czf "$OUT/spec_logs.tar.gz" -C "$OUT" $(cd "$OUT" && ls spec_*.log spec_trace_*.csv 2>/dev/null) && rm -f "$OUT"/spec_*.log "$OUT"/spec_*.json "$OUT"/spec_prompts_*.txt "$OUT"/spec_trace_*.csv
fi
if has draft; then
  timeout 200 "$BUILD_DIR/bench/model_cuda/draft_bench" --model "${SPEC_MODEL:-models/default}" \
    --batches "${DRAFT_BATCHES:-1,16,64}" --k "${SPEC_K:-5}" --profile --out "$OUT/draft.json" \
    > "$OUT/draft.log" 2>&1
  say "draft_bench exit $?"
  head -6 "$OUT/draft.log" | tee -a "$OUT/summary.txt"
fi
if has flashmla; then
  FM="$PWD/.deps/flashmla/src"
  tools/gpu/flashmla_build.sh "${FLASHMLA_BUILD_S:-500}" "${JOBS:-16}" "$OUT/flashmla_build.log"
  fm_build=$?
  if [ ! -d "$FM" ]; then
    say "flashmla: no .deps/flashmla.tar.xz (tools/gpu/make_flashmla_carry.sh, then carry it)"
  else
    cat "$FM/FLASHMLA_CARRY.txt" >> "$OUT/summary.txt"
    say "flashmla: build exit $fm_build"
    PYTHONPATH="$FM" timeout 150 python3 bench/model_cuda/flashmla_peer.py run \
      --batches "${FLASHMLA_BATCHES:-2,64,128,256}" --csv "$OUT/flashmla.csv" \
      > "$OUT/flashmla.log" 2>&1
    say "flashmla: peer exit $?"; tail -4 "$OUT/flashmla.log" | tee -a "$OUT/summary.txt"
    timeout 200 "$BUILD_DIR/tests/ops/cuda/ops_cuda_test" --perf --filter=sparse_attention \
      > "$OUT/sparse_perf.log" 2>&1
    python3 bench/model_cuda/flashmla_peer.py compare "$OUT/flashmla.csv" "$OUT/sparse_perf.log" \
      --csv "$OUT/flashmla_ratio.csv" 2>&1 | tee -a "$OUT/summary.txt"
  fi
fi
if has replay; then
  # The full tree with its benchmarks (configure only adds them; only replay_bench is built).
  { build_engine_bin && timeout 60 cmake -S . -B "$FULL" -DDEEPINFER_BUILD_BENCH=ON > "$OUT/replay_build.log" 2>&1 &&
    timeout 300 cmake --build "$FULL" --target replay_bench -j "${JOBS:-16}" >> "$OUT/replay_build.log" 2>&1; } ||
    { say "replay: build FAILED"; grep -E -m10 'error|Error' "$OUT/replay_build.log" | tee -a "$OUT/summary.txt"; }
  PROMPT="${REPLAY_PROMPT:-.deps/replay_prompt.txt}"
  [ -f "$PROMPT" ] || head -c "${REPLAY_CHARS:-30000}" data/default_model/text/val.txt > "$PROMPT"
  timeout 300 "$FULL/bench/replay/replay_bench" --model models/default --backend cuda \
    --prompt-text "$PROMPT" --keep "${REPLAY_KEEP:-140,190,512}" --tokens 256 --reps 3 \
    --csv "$OUT/replay.csv" > "$OUT/replay.log" 2>&1
  say "replay_bench exit $?"
  tail -5 "$OUT/replay.log" | tee -a "$OUT/summary.txt"
fi
say "done"
