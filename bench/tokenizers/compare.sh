#!/usr/bin/env bash
# Char against byte-level BPE at equal wall-clock time: a GPT (d_model 128, 4 layers, 4 heads,
# block 64) trained for the same --time on tinyshakespeare with characters, BPE of 512 and BPE of
# 2,000 tokens, one after the other on an otherwise idle machine; prints each run's best
# validation loss in bits per byte (metrics.jsonl's val_bpb) and its steps and tokens/s.
#   bench/tokenizers/compare.sh ATTO DATA OUT [TIME]      (TIME: default 10m)
set -euo pipefail
ATTO=$1 DATA=$2 OUT=$3 TIME=${4:-10m}
mkdir -p "$OUT"
for tk in char bpe512 bpe2000; do
  case $tk in
    char) flags=(--tokenizer char) ;;
    bpe512) flags=(--tokenizer bpe --vocab-size 512) ;;
    bpe2000) flags=(--tokenizer bpe --vocab-size 2000) ;;
  esac
  rm -rf "${OUT:?}/$tk"
  "$ATTO" train --data "$DATA" --mode stream "${flags[@]}" --d-model 128 --n-layers 4 --n-heads 4 --block-size 64 \
    --time "$TIME" --seed 1337 --out "$OUT/$tk" -q >"$OUT/$tk.log" 2>&1
done
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
print("| tokenizer | vocabulary | steps | tokens/s | best val loss (nats/token) | best val bits/byte |")
print("|---|---|---|---|---|---|")
for tk in ("char", "bpe512", "bpe2000"):
    rows = [json.loads(l) for l in open(f"{out}/{tk}/metrics.jsonl")]
    evals = [r for r in rows if "val_loss" in r]
    best = min(evals, key=lambda r: r["val_loss"])
    speed = [r["tokens_per_s"] for r in rows if "tokens_per_s" in r]
    cfg = json.load(open(f"{out}/{tk}/config.json"))
    print(f"| {tk} | {cfg['model']['vocab_size']} | {max(r['step'] for r in rows)} | {sum(speed) / len(speed):,.0f} | "
          f"{best['val_loss']:.4f} | {best['val_bpb']:.4f} |")
PY
