#!/usr/bin/env bash
# The single command that trains, exports and packages the embedded default model (issue 7) on a GPU host:
#
#   OUT=/some/dir bash tools/train/run_gpu_training.sh [MINUTES]      # from the repository root
#
# Needs python3 with torch + transformers 5.17 (+ matplotlib for the plot; skipped without it), the prepared
# tokens in data/default_model/tokens (tools/train/prepare_data.py; carried into the working tree) and
# models/default/tokenizer.json. Total wall time ~ MINUTES + 1.5 min (model build, evaluations, export,
# verification). Writes at most 8 files into $OUT:
#   run.log            stdout/stderr of training + export
#   train_log.csv      step, tokens, lr, train/val losses (main and MTP), QAT flag, expert load
#   summary.json       training metrics + export report (sizes, reload check, official-mode loss)
#   loss_curve.png     the model card's loss curve
#   default_model.tar.partNN   the exported models/default/ files (official layout), split in <= 15 MB parts:
#                      cat default_model.tar.part* | tar -x -C models/default
set -euo pipefail
cd "$(dirname "$0")/../.."
MINUTES="${1:-${TRAIN_MINUTES:-5}}"
: "${OUT:?set OUT to the output directory}"
mkdir -p "$OUT"
RUN="$(mktemp -d)"
LOG="$OUT/run.log"
PY="${PYTHON:-python3}"
{
  echo "== $(date -u) host $(hostname) python $($PY -c 'import sys,torch,transformers;print(sys.version.split()[0],"torch",torch.__version__,"transformers",transformers.__version__)')"
  nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null || true
  $PY tools/train/train_default_model.py --minutes "$MINUTES" --out "$RUN" ${TRAIN_ARGS:-}
  echo "== export $(date -u)"
  $PY tools/train/export_checkpoint.py "$RUN/checkpoint.pt" --out "$RUN/export" --tokenizer-dir models/default \
      --verify data/default_model/tokens/val.bin --verify-windows 256 --official-windows "${OFFICIAL_WINDOWS:-32}" \
      --report "$RUN/export_report.json"
} 2>&1 | grep --line-buffered -v "Writing model shards\|Loading weights" | tee "$LOG"
cp "$RUN/train_log.csv" "$OUT/"
$PY - "$RUN" "$OUT" <<'PYEOF' | tee -a "$LOG"
import json, sys, pathlib
run, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
m = json.loads((run / "metrics.json").read_text())
r = json.loads((run / "export_report.json").read_text())
(out / "summary.json").write_text(json.dumps({"training": m, "export": r}, indent=1) + "\n")
pre, fin = m["pre_qat"], m["final_qat"]
hf = r.get("verify", {}).get("hf_semantics_on_export", {})
off = r.get("verify", {}).get("official_semantics_on_export", {})
print("== summary")
print(f"steps {m['steps']}  tokens {m['tokens']/1e6:.1f} M  time {m['train_seconds']:.0f} s  tokens/s {m['tokens_per_s']:.0f}")
print(f"final train loss {m['final_train_loss']:.3f}  train MTP loss {m['final_train_mtp_loss']:.3f}")
print(f"val loss before QAT {pre['loss']:.3f} (MTP {pre['mtp_loss']:.3f}, MTP top-1 {pre['mtp_acc']:.3f})")
print(f"val loss after QAT  {fin['loss']:.3f} (MTP {fin['mtp_loss']:.3f}, MTP top-1 {fin['mtp_acc']:.3f})  [fake-quantised weights]")
un = m.get("final_unquantized")
if un:
    print(f"same final weights unquantised: val {un['loss']:.3f} (MTP {un['mtp_loss']:.3f})")
if hf:
    print(f"exported checkpoint reloaded (HF semantics): val {hf['loss']:.3f}  MTP {hf['mtp_loss']:.3f}")
same = r.get("verify", {}).get("hf_semantics_same_windows", {})
if off:
    print(f"official_ref quantised semantics on {off['windows']} windows: val {off['loss']:.3f}  MTP {off['mtp_loss']:.3f}"
          f"  (HF semantics, same windows: val {same.get('loss', float('nan')):.3f}  MTP {same.get('mtp_loss', float('nan')):.3f})")
print(f"export: {r['export']['bytes']/1e6:.2f} MB in {r['export']['shards']} shards")
PYEOF
$PY tools/train/plot_loss.py "$RUN/train_log.csv" "$OUT/loss_curve.png" 2>&1 | tail -1 | tee -a "$LOG" || true
tar -C "$RUN/export" -cf "$RUN/default_model.tar" .
split -b 15M -d -a 2 "$RUN/default_model.tar" "$OUT/default_model.tar.part"
ls -la "$OUT" | tee -a "$LOG"
