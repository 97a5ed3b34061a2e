#!/usr/bin/env bash
# atto quantize: a run directory or a GGUF file to a GGUF file of f32, f16, q8_0 or q4_0 matrices.
#   - a run quantized to q4_0 samples and evaluates, its perplexity near the run's own;
#   - GGUF in: an f32 export quantized to q8_0 (and to q4_0) is byte for byte the run exported at
#     that type (the metadata in its order, the 1-D tensors copied, the matrices re-encoded);
#   - a q4_0 file is not "re-quantized" to q8_0 without --allow-requantize;
#   - bad input (type, IN, OUT) is an error naming the flag or the file, and writes nothing.
# Usage: test_quantize.sh PATH/TO/atto
set -u
ATTO=${1:?usage: test_quantize.sh path/to/atto}
. "$(dirname "$0")/lib.sh"

write_names >"$W/names.txt"
RUN=$W/run
# d_model 64: every matrix's rows are a multiple of q4_0's block of 32, and the MLP's output
# projection's (d_ff = 256) fill q4_k's super-blocks of 256.
expect_ok "$ATTO" train --data "$W/names.txt" --out "$RUN" --n-layers 1 --d-model 64 --n-heads 2 --batch-size 16 \
  --steps 150 --lr 0.01 --warmup 10 --eval-every 150 --threads 1 -q
expect_ok "$ATTO" quantize --help
"$ATTO" quantize --help | grep -q -- "--allow-requantize" && ok || bad "quantize --help lacks --allow-requantize"

# ---- a run directory -> q4_0 --------------------------------------------------------------------
out=$("$ATTO" quantize "$RUN" "$W/q4.gguf" --type q4_0 2>&1) && ok || bad "quantize RUN --type q4_0: $out"
echo "  $out"
grep -q "tensors (.*q4_0" <<<"$out" && ok || bad "the summary does not count q4_0 tensors: $out"
expect_ok "$ATTO" sample --model "$W/q4.gguf" -n 3 --seed 1
ppl() { "$ATTO" eval --model "$1" --data "$W/names.txt" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["perplexity"])'; }
p32=$(ppl "$RUN")
p4=$(ppl "$W/q4.gguf")
echo "  perplexity: run (f32) $p32, q4_0 $p4"
python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if a / 1.25 < b < a * 1.25 else 1)" \
  "$p32" "$p4" && ok || bad "q4_0 perplexity $p4 is not within 25% of the f32 run's $p32"
[ "$p4" != "$p32" ] && ok || bad "q4_0 perplexity equals the f32 one: nothing was quantized"
# sample, score and eval compute on the q4_0 rows (the integer kernels); the commands that change
# or convert weights read the same file as floats: fine-tuning from it, exporting it.
expect_ok "$ATTO" score --model "$W/q4.gguf" emma
expect_ok "$ATTO" train --init-from "$W/q4.gguf" --data "$W/names.txt" --out "$W/ft" --steps 3 --threads 1 -q
expect_ok "$ATTO" export --model "$W/q4.gguf" --format gguf --type f32 --out "$W/q4-as-f32.gguf"

# RUN quantized to $1 into $2: the summary counts $3 and $4 tensors, and the perplexity is within a
# factor $5 of the f32 run's.
k_quant() {
  local type=$1 file=$2 t1=$3 t2=$4 factor=$5 out p
  out=$("$ATTO" quantize "$RUN" "$file" --type "$type" 2>&1) && ok || bad "quantize RUN --type $type: $out"
  echo "  $out"
  grep -q "tensors (.*$t1" <<<"$out" && grep -q "tensors (.*$t2" <<<"$out" && ok || bad "$type summary: $out"
  p=$(ppl "$file")
  echo "  perplexity: $type $p"
  python3 -c "import sys; a, b, f = map(float, sys.argv[1:]); sys.exit(0 if a / f < b < a * f else 1)" \
    "$p32" "$p" "$factor" && ok || bad "$type perplexity $p is not within a factor $factor of the f32 run's $p32"
}
# q4_k: the matrix of 256-value rows as Q4_K, the others (rows of 64) as q8_0, as the summary says.
k_quant q4_k "$W/k.gguf" q4_k q8_0 1.1
# q6_k the same way (6.6 bits a weight): within 2% of f32, as q8_0 below.
k_quant q6_k "$W/k6.gguf" q6_k q8_0 1.02
# q4_k_m, llama.cpp's mix: the MLP's down matrix (layer 0 of 1) Q6_K, the other matrices q8_0 here
# (rows of 64), the learned positions f32 (llama.cpp never quantizes them).
k_quant q4_k_m "$W/km.gguf" q6_k q8_0 1.02

# ---- a GGUF file -> another type: the same bytes as exporting the run at that type ----------------
expect_ok "$ATTO" export --model "$RUN" --format gguf --type f32 --out "$W/f32.gguf"
expect_ok "$ATTO" export --model "$RUN" --format gguf --type q8_0 --out "$W/q8.gguf"
expect_ok "$ATTO" quantize "$W/f32.gguf" "$W/q8-from-gguf.gguf" --type q8_0
cmp -s "$W/q8.gguf" "$W/q8-from-gguf.gguf" && ok || bad "f32 GGUF -> q8_0 differs from the run exported at q8_0"
expect_ok "$ATTO" quantize "$W/f32.gguf" "$W/q4-from-gguf.gguf" --type q4_0
cmp -s "$W/q4.gguf" "$W/q4-from-gguf.gguf" && ok || bad "f32 GGUF -> q4_0 differs from the run quantized to q4_0"
p8=$(ppl "$W/q8.gguf")
echo "  perplexity: q8_0 $p8 (integer kernels)"
python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if a / 1.02 < b < a * 1.02 else 1)" \
  "$p32" "$p8" && ok || bad "q8_0 perplexity $p8 is not within 2% of the f32 run's $p32"
[ "$("$ATTO" eval --model "$W/q8.gguf" --data "$W/names.txt")" = \
  "$("$ATTO" eval --model "$W/q8-from-gguf.gguf" --data "$W/names.txt")" ] && ok || bad "q8_0 evals differ"
# Down is allowed (q8_0 -> q4_0), up is refused unless asked for; the same type copies.
expect_ok "$ATTO" quantize "$W/q8.gguf" "$W/q8-q4.gguf" --type q4_0
expect_fail "would not make it better than q4_0" "$ATTO" quantize "$W/q4.gguf" "$W/up.gguf" --type q8_0
[ ! -e "$W/up.gguf" ] && ok || bad "a refused re-quantization wrote its OUT"
expect_ok "$ATTO" quantize "$W/q4.gguf" "$W/up.gguf" --type q8_0 --allow-requantize
expect_ok "$ATTO" sample --model "$W/up.gguf" -n 2 --seed 1
expect_ok "$ATTO" quantize "$W/q4.gguf" "$W/same.gguf" --type q4_0
cmp -s "$W/q4.gguf" "$W/same.gguf" && ok || bad "q4_0 -> q4_0 did not copy the file as it was"

# ---- bad input ---------------------------------------------------------------------------------------
expect_fail "--type must be f32, f16, bf16, q8_0, q6_k, q5_k, q5_1, q5_0, q4_k, q4_1, q4_0, q3_k, q3_k_m, q4_k_m or q5_k_m, got 'q2_k'" "$ATTO" quantize "$RUN" "$W/x.gguf" --type q2_k
expect_fail "--type is required" "$ATTO" quantize "$RUN" "$W/x.gguf"
expect_fail "IN $W/missing does not exist" "$ATTO" quantize "$W/missing" "$W/x.gguf" --type q4_0
expect_fail "IN $W/names.txt is neither a run directory nor a GGUF file" "$ATTO" quantize "$W/names.txt" "$W/x.gguf" \
  --type q4_0
expect_fail "OUT $W/q4.gguf is IN" "$ATTO" quantize "$W/q4.gguf" "$W/q4.gguf" --type q4_0
expect_fail "OUT $W is a directory" "$ATTO" quantize "$RUN" "$W" --type q4_0
expect_fail "not an atto run directory" "$ATTO" quantize "$W" "$W/x.gguf" --type q4_0
head -c 200 "$W/f32.gguf" >"$W/cut.gguf"
expect_fail "$W/cut.gguf: " "$ATTO" quantize "$W/cut.gguf" "$W/x.gguf" --type q4_0
[ ! -e "$W/x.gguf" ] && ok || bad "a refused quantize wrote its OUT"
expect_fail "--type must be f32, f16, bf16, q8_0, q6_k, q5_k, q5_1, q5_0, q4_k, q4_1, q4_0, q3_k, q3_k_m, q4_k_m or q5_k_m, got 'iq4_nl'" "$ATTO" export --model "$RUN" --type iq4_nl \
  --out "$W/x.gguf"

finish quantize
