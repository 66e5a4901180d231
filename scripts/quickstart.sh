#!/usr/bin/env bash
# The README's first command: sets everything up (scripts/setup.sh) and runs the main job,
# offline inference (examples/offline_inference.py): a few prompts through the engine on the
# CPU, printing the generated text and the throughput. The model is DEEPINFER_HF_MODEL_DIR, else
# the Hugging Face cache copy of the default checkpoint, else the embedded default model
# (models/default, a small DeepSeek-V4.1 with its DSpark drafter, trained by this project),
# then again with speculative decoding, printing the acceptance length and tokens/s.
set -euo pipefail
DEEPINFER_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$DEEPINFER_ROOT"
. scripts/setup.sh

python examples/offline_inference.py
