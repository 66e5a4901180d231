#!/usr/bin/env bash
# Trains, exports and packages the V4.1 default model (issue 20) on a GPU host, in one command:
#
#   OUT=/some/dir bash tools/train/run_gpu_training_v41.sh [MINUTES]      # from the repository root
#
# Needs python3 with torch + transformers 5.17, NeMo AutoModel 0.7.0 (`pip install --no-deps
# nemo-automodel==0.7.0`; on the device machine a wheel carried in .whl/, installed here into /tmp/site), the
# prepared tokens in data/default_model/tokens (tools/train/prepare_data.py) and models/default/tokenizer.json.
# Writes into $OUT (at most 8 files): run.log, train_log.csv, metrics.json, loss_curve.png and
# v41_model.tar.partNN (the exported folder, <= 15 MB parts): cat v41_model.tar.part* | tar -x -C models/v41
set -euo pipefail
cd "$(dirname "$0")/../.."
MINUTES="${1:-${TRAIN_MINUTES:-5}}"
: "${OUT:?set OUT to the output directory}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
if ! $PY -c "import nemo_automodel" 2>/dev/null && ls .whl/nemo_automodel-*.whl >/dev/null 2>&1; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
  export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi
export TORCHDYNAMO_DISABLE=1 PYTHONUNBUFFERED=1
RUN="$(mktemp -d)"
{
  echo "== $(date -u) python $($PY -c 'import sys,torch,transformers,nemo_automodel as n;print(sys.version.split()[0],"torch",torch.__version__,"transformers",transformers.__version__,"nemo-automodel",n.__version__)')"
  nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null || true
  $PY tools/train/train_v41_model.py --minutes "$MINUTES" --out "$RUN" ${TRAIN_ARGS:-}
} 2>&1 | grep --line-buffered -v "torch_dtype\` is deprecated" | tee "$OUT/run.log"
cp "$RUN/train_log.csv" "$RUN/metrics.json" "$OUT/"
$PY tools/train/plot_loss.py "$RUN/train_log.csv" "$OUT/loss_curve.png" 2>&1 | tail -1 | tee -a "$OUT/run.log" || true
if [ -d "$RUN/export" ]; then
  tar -C "$RUN/export" -cf "$RUN/v41_model.tar" .
  split -b 15M -d -a 2 "$RUN/v41_model.tar" "$OUT/v41_model.tar.part"
fi
ls -la "$OUT" | tee -a "$OUT/run.log"
