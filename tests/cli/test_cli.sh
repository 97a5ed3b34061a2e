#!/usr/bin/env bash
# End-to-end tests of the atto command line on small data the test makes itself.
# Usage: test_cli.sh PATH/TO/atto
# Every bad input must give "atto: error: <message>" on stderr, a non-zero exit, and leave an
# existing run directory byte-for-byte intact.
set -u
ATTO=${1:?usage: test_cli.sh path/to/atto}
. "$(dirname "$0")/lib.sh"

# ---- data the tests make ----------------------------------------------------------------------
write_names >"$W/names.txt"
for i in $(seq 1 60); do echo "the quick brown fox jumps over the lazy dog number $i and keeps running far away"; done >"$W/prose.txt"
RUN="$W/run"
TRAIN_SMALL=(--n-layers 1 --d-model 16 --n-heads 2 --batch-size 8 --steps 30 --eval-every 15 --log-every 10 -q)

# ---- the happy path ---------------------------------------------------------------------------
expect_ok "$ATTO" --help
expect_ok "$ATTO" train --help
expect_ok "$ATTO" train --data "$W/names.txt" --out "$RUN" "${TRAIN_SMALL[@]}"
for f in config.json tokenizer.json model.safetensors train_state.safetensors metrics.jsonl; do
  [ -s "$RUN/$f" ] && ok || bad "run file $f missing or empty"
done
grep -q '"mode": "lines"' "$RUN/config.json" && ok || bad "auto mode did not pick lines for names"
expect_ok "$ATTO" eval --model "$RUN" --data "$W/names.txt"
"$ATTO" eval --model "$RUN" --data "$W/names.txt" --json | grep -q '"perplexity"' && ok || bad "eval --json"
expect_ok "$ATTO" train --resume "$RUN" --steps 40 -q
grep -q '"steps": 40' "$RUN/config.json" && ok || bad "resume did not record the new step total"
expect_ok "$ATTO" train --data "$W/prose.txt" --out "$W/prose" --mode stream --block-size 16 "${TRAIN_SMALL[@]}"
grep -q '"mode": "stream"' "$W/prose/config.json" && ok || bad "stream mode not recorded"
if "$ATTO" --help | grep -q "^  sample"; then
  expect_ok "$ATTO" sample --model "$RUN" -n 5 --seed 1
  [ "$("$ATTO" sample --model "$RUN" -n 5 --seed 3)" = "$("$ATTO" sample --model "$RUN" -n 5 --seed 3)" ] && ok || bad "same seed, different samples"
  expect_ok "$ATTO" sample --model "$RUN" -n 3 --prompt ma --temperature 0.8 --top-p 0.9
  expect_ok "$ATTO" sample --model "$RUN" -n 10 --report
  expect_ok "$ATTO" score --model "$RUN" mari jo
  expect_ok "$ATTO" sample --model "$W/prose" -n 1 --max-tokens 40
fi

# ---- bad input: a good run must survive every one of these --------------------------------------
snapshot() { (cd "$RUN" && sha1sum config.json tokenizer.json model.safetensors train_state.safetensors metrics.jsonl); }
before=$(snapshot)
printf '' >"$W/empty.txt"
printf '\n\n\n' >"$W/newlines.txt"
printf 'abc\n\xff\xfe bad\n' >"$W/binary.txt"
printf 'short\n' >"$W/short.txt"
{ write_names 50; printf 'a%.0s' $(seq 1 80); echo; } >"$W/longline.txt"
expect_fail "does not exist" "$ATTO" train --data "$W/missing.txt" --out "$W/x1"
expect_fail "directory" "$ATTO" train --data "$W" --out "$W/x2"
expect_fail "empty" "$ATTO" train --data "$W/empty.txt" --out "$W/x3"
expect_fail "only" "$ATTO" train --data "$W/newlines.txt" --out "$W/x4"
expect_fail "UTF-8" "$ATTO" train --data "$W/binary.txt" --out "$W/x5"
expect_fail "block" "$ATTO" train --data "$W/short.txt" --out "$W/x6" --mode stream --block-size 64
expect_fail "--block-size" "$ATTO" train --data "$W/longline.txt" --out "$W/x7" --mode lines --block-size 32
expect_fail "must be a positive multiple of n_heads" "$ATTO" train --data "$W/names.txt" --out "$W/x8" --d-model 30 --n-heads 4
expect_fail "n_layers must be at least 1" "$ATTO" train --data "$W/names.txt" --out "$W/x9" --n-layers -1
expect_fail "--lr must be a positive finite number" "$ATTO" train --data "$W/names.txt" --out "$W/x10" --lr -1
expect_fail "--lr must be a positive finite number" "$ATTO" train --data "$W/names.txt" --out "$W/x11" --lr nan
expect_fail "--no-such-flag" "$ATTO" train --data "$W/names.txt" --out "$W/x12" --no-such-flag 3
expect_fail "already holds a run" "$ATTO" train --data "$W/names.txt" --out "$RUN" "${TRAIN_SMALL[@]}"
expect_fail "is not a run directory" "$ATTO" train --resume "$W/no-such-run"
expect_fail "a file, not a run directory" "$ATTO" train --resume "$W/names.txt"
mkdir -p "$W/nostate" && cp "$RUN/config.json" "$RUN/tokenizer.json" "$W/nostate/"
expect_fail "no training state to resume" "$ATTO" train --resume "$W/nostate" --steps 50
expect_fail "cannot be changed when resuming" "$ATTO" train --resume "$RUN" --d-model 32
if "$ATTO" --help | grep -q "^  sample"; then
  expect_fail "temperature" "$ATTO" sample --model "$RUN" --temperature 0
  expect_fail "top-p" "$ATTO" sample --model "$RUN" --top-p 1.5
  expect_fail "top-p" "$ATTO" sample --model "$RUN" --top-p 0
  # A file that is not GGUF: said so, not "not a directory".
  expect_fail "does not start with GGUF's magic" "$ATTO" sample --model "$W/names.txt"
  expect_fail "does not exist" "$ATTO" sample --model "$W/no-such-model.gguf"
fi
# Broken checkpoints, in copies of the run.
cp -r "$RUN" "$W/trunc" && head -c 1000 "$RUN/model.safetensors" >"$W/trunc/model.safetensors"
expect_fail "model.safetensors" "$ATTO" eval --model "$W/trunc" --data "$W/names.txt"
cp -r "$RUN" "$W/corrupt" && printf 'garbage!' | dd of="$W/corrupt/model.safetensors" bs=1 seek=8 conv=notrunc 2>/dev/null
expect_fail "model.safetensors" "$ATTO" eval --model "$W/corrupt" --data "$W/names.txt"
cp -r "$RUN" "$W/shapes" && sed -i 's/"d_model": 16/"d_model": 32/' "$W/shapes/config.json"
expect_fail "has shape" "$ATTO" eval --model "$W/shapes" --data "$W/names.txt"
expect_fail "not an atto run directory" "$ATTO" eval --model "$W" --data "$W/names.txt"
[ "$(snapshot)" = "$before" ] && ok || bad "the good run directory changed during the bad-input tests"

# ---- seq2seq ------------------------------------------------------------------------------------
expect_ok "$ATTO" data synth reverse --n 300 --out "$W/rev" --seed 3
[ "$(wc -l <"$W/rev.src")" = 300 ] && ok || bad "synth wrote the wrong number of pairs"
S2S=(--task seq2seq --n-layers 1 --d-model 16 --n-heads 2 --steps 20 --eval-every 10 --eval-bleu 20 --warmup 5 -q)
expect_ok "$ATTO" train "${S2S[@]}" --src "$W/rev.src" --tgt "$W/rev.tgt" --out "$W/s2s"
head -5 "$W/rev.src" >"$W/five.src"
head -5 "$W/rev.tgt" >"$W/five.tgt"
[ "$("$ATTO" translate --model "$W/s2s" --beam 3 <"$W/five.src" | wc -l)" = 5 ] && ok || bad "translate: one line per source"
[ "$(printf '1 2 3

4 5
' | "$ATTO" translate --model "$W/s2s" | wc -l)" = 3 ] && ok || bad "translate: empty lines keep their place"
"$ATTO" translate --model "$W/s2s" --beam 3 --n-best 2 --input "$W/five.src" | grep -q '^0 ||| ' && ok || bad "n-best output"
"$ATTO" translate --model "$W/s2s" --json --attention --input "$W/five.src" | head -1 | grep -q '"cross_attention"' && ok || bad "json attention"
"$ATTO" eval --model "$W/s2s" --src "$W/five.src" --ref "$W/five.tgt" | grep -q 'BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp' && ok || bad "eval BLEU signature"
head -4 "$W/rev.tgt" >"$W/four.tgt"
expect_fail "4" "$ATTO" train --task seq2seq --src "$W/rev.src" --tgt "$W/four.tgt" --out "$W/x20"
expect_fail "300" "$ATTO" eval --model "$W/s2s" --src "$W/rev.src" --ref "$W/four.tgt"
expect_fail "use \`atto sample" "$ATTO" translate --model "$RUN" --input "$W/five.src"
expect_fail "use \`atto translate" "$ATTO" sample --model "$W/s2s"
cp -r "$W/s2s" "$W/missing-spm"
echo '{"type":"spm","version":1,"special_tokens":["<pad>","<bos>","<eos>","<unk>"],"model":"spm.model","vocab_size":15}' >"$W/missing-spm/src/tokenizer.json"
expect_fail "spm.model" "$ATTO" translate --model "$W/missing-spm" --input "$W/five.src"
expect_fail "--beam" "$ATTO" translate --model "$W/s2s" --beam 0 --input "$W/five.src"

finish cli
