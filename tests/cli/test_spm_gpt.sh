#!/usr/bin/env bash
# A GPT on SentencePiece (--tokenizer spm: byte fallback, identity normalisation): stream and
# lines mode, the model file beside tokenizer.json, any text round-trips, sampling, resume,
# a prepared corpus; GGUF export refuses it with a clear message.
ATTO=$1
SRC=$(cd "$(dirname "$0")/../.." && pwd)
source "$SRC/tests/cli/lib.sh"

for i in $(seq 1 300); do printf 'The cat sat on the mat %d times,  and the dog ate %d bones; caf\xc3\xa9.\n\n' $i $((i * 7 % 13)); done >"$W/prose.txt"
T="--d-model 32 --n-heads 2 --n-layers 2 --block-size 32 --threads 1 --lr 0.01 -q"
expect_ok "$ATTO" train --data "$W/prose.txt" --mode stream --tokenizer spm --vocab-size 400 --steps 30 $T --out "$W/s"
[ -f "$W/s/spm.model" ] && ok || bad "no spm.model in the run"
[ "$(py 'd["type"], d["boundary"], 259 < d["vocab_size"] <= 400' "$W/s/tokenizer.json")" == "spm False True" ] && ok ||
  bad "tokenizer.json: $(cat "$W/s/tokenizer.json")"
# Byte fallback and no normalisation: text with characters never seen, double spaces and newlines
# comes back exactly.
printf 'Zebra  \xe2\x82\xac\xf0\x9f\x98\x80 quux\n  x\n' >"$W/odd.txt"
"$ATTO" tokenize --model "$W/s" --json <"$W/odd.txt" >"$W/ids.json"
"$ATTO" tokenize --model "$W/s" --decode --json <"$W/ids.json" >"$W/back.txt"
cmp -s "$W/odd.txt" "$W/back.txt" && ok || bad "SentencePiece round trip changed the text: $(cat "$W/back.txt")"
out=$("$ATTO" sample --model "$W/s" --prompt "The  cat" -n 2 --max-tokens 20 --seed 3)
[[ "$out" == "The  cat"* ]] && ok || bad "sample does not start with the prompt: $out"
# Exact resume (constant learning rate).
C="--schedule constant --warmup 0"
expect_ok "$ATTO" train --data "$W/prose.txt" --mode stream --tokenizer spm --vocab-size 400 --steps 20 $T $C --out "$W/a"
expect_ok "$ATTO" train --data "$W/prose.txt" --mode stream --tokenizer spm --vocab-size 400 --steps 30 $T $C --out "$W/b"
expect_ok "$ATTO" train --resume "$W/a" --steps 30 -q
cmp -s "$W/a/model.safetensors" "$W/b/model.safetensors" && ok || bad "SentencePiece resume is not bit-exact"
# Lines mode: </s> ends each line and each sample.
write_names 400 >"$W/names.txt"
expect_ok "$ATTO" train --data "$W/names.txt" --mode lines --tokenizer spm --vocab-size 300 --steps 20 $T --out "$W/l"
[ "$(py 'd["boundary"]' "$W/l/tokenizer.json")" == True ] && ok || bad "lines mode without a boundary"
[ "$("$ATTO" sample --model "$W/l" -n 4 --seed 1 | wc -l)" == 4 ] && ok || bad "lines-mode samples"
# A prepared corpus keeps the model file; training from it works.
expect_ok "$ATTO" data prepare --model "$W/s" --input "$W/prose.txt" --out "$W/prep" --val-fraction 0.1
[ -f "$W/prep/spm.model" ] && ok || bad "the prepared corpus has no spm.model"
expect_ok "$ATTO" train --data "$W/prep" $T --steps 10 --out "$W/p"
# GGUF (llama.cpp's llama tokenizer; cli.llamacpp checks it against llama.cpp): read back, the
# same tokens and scores as the run directory, lines mode's boundary included.
for m in s l; do
  expect_ok "$ATTO" export --model "$W/$m" --out "$W/$m.gguf"
  head -n 20 "$W/names.txt" >"$W/few.txt"
  cmp -s <("$ATTO" score --model "$W/$m" --file "$W/few.txt" --json) \
    <("$ATTO" score --model "$W/$m.gguf" --file "$W/few.txt" --json) && ok || bad "$m.gguf scores differently"
done
finish spm_gpt
