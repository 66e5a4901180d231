#!/usr/bin/env bash
# The README's first command: sets everything up (scripts/setup.sh) and runs the main job.
# Today that is the best end-to-end path that exists: the DeepSeek-V4 chat format, the real V4
# tokenizer and a validated checkpoint (examples/quickstart.py), then greedy generation on the
# CPU backend from a small V4 checkpoint. Pass a model directory to use your own checkpoint.
set -euo pipefail
DEEPINFER_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$DEEPINFER_ROOT"
. scripts/setup.sh

MODEL_DIR="${1:-${DEEPINFER_HF_MODEL_DIR:-tests/data/model/v4_tiny_a/official_quant}}"
python examples/quickstart.py "$MODEL_DIR"

echo
echo "== deepinfer inspect $MODEL_DIR =="
deepinfer inspect "$MODEL_DIR"

if deepinfer generate --help >/dev/null 2>&1; then
  echo
  echo "== deepinfer generate (greedy, CPU) =="
  deepinfer generate --model "$MODEL_DIR" --prompt-ids 5,17,42 --max-tokens 16 --temperature 0 --ignore-eos --json
fi
