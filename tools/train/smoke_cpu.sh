#!/usr/bin/env bash
# End-to-end CPU smoke run of the default-model pipeline at toy scale (issue 7), in a temporary folder:
# data (1500 documents per source) -> tokenizer (1024 ids) -> train (toy size, 0.5 min) -> export (official
# layout, 10 MB shards) -> reload + checks. Needs the Debian packages of prepare_data.py and a python with
# torch, transformers 5.17, tokenizers, numpy, safetensors:
#
#   PYTHON=/work/refenv/bin/python bash tools/train/smoke_cpu.sh [WORKDIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
PY="${PYTHON:-python3}"
W="${1:-$(mktemp -d)}"
mkdir -p "$W"
T=tools/train
$PY $T/prepare_data.py text --data-dir "$W/data" --max-docs 1500 | tail -4
$PY $T/train_tokenizer.py --vocab 1024 --train-text "$W/data/text/train.txt" --out "$W/tok"
$PY $T/prepare_data.py encode --data-dir "$W/data" --tokenizer "$W/tok/tokenizer.json" | grep -A2 '"train"'
$PY $T/train_default_model.py --size toy --minutes "${SMOKE_MINUTES:-0.5}" --data "$W/data/tokens" --out "$W/run" \
    --val-windows 4 --eval-every 1000 --warmup 5 --batch 2
$PY $T/export_checkpoint.py "$W/run/checkpoint.pt" --out "$W/export" --tokenizer-dir "$W/tok" \
    --verify "$W/data/tokens/val.bin" --verify-windows 4 --official-windows 1 --hf-out "$W/hf_fp32" \
    --report "$W/export_report.json" 2>&1 | grep -v "Writing model\|Loading weights"
$PY $T/check_export.py "$W/export" --shard-mb 10
echo "smoke run OK in $W"
