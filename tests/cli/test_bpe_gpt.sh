#!/usr/bin/env bash
# A GPT on byte-level BPE (--tokenizer bpe): training in stream and lines mode, the run's files,
# bits per byte in the log and in atto eval, sampling, scoring, atto tokenize --model, exact
# resume, GGUF export and import; tokenizers a task cannot use are refused.
ATTO=$1
SRC=$(cd "$(dirname "$0")/../.." && pwd)
source "$SRC/tests/cli/lib.sh"

for i in $(seq 1 300); do printf 'The cat sat on the mat %d times, and the dog ate %d bones; caf\xc3\xa9 \xe2\x82\xac%d.\n' $i $((i * 7 % 13)) $((i % 5)); done >"$W/prose.txt"
T="--d-model 32 --n-heads 2 --n-layers 2 --block-size 32 --threads 1 --lr 0.01 -q"
expect_ok "$ATTO" train --data "$W/prose.txt" --mode stream --tokenizer bpe --vocab-size 300 --steps 40 \
  --eval-every 20 $T --out "$W/s"
[ "$(py 'd["type"]' "$W/s/tokenizer.json")" == bpe ] && ok || bad "tokenizer.json of a bpe run is not type bpe"
[ "$(py 'd["data"]["tokenizer"]' "$W/s/config.json")" == bpe ] && ok || bad "config.json does not say tokenizer bpe"
[ "$(py 'len(d["vocab"])' "$W/s/tokenizer.json")" == 300 ] && ok || bad "the vocabulary is not 300 tokens"
[ "$(py '"<|endoftext|>" in d["special_tokens"]' "$W/s/tokenizer.json")" == False ] && ok ||
  bad "a stream-mode BPE vocabulary has <|endoftext|>"
grep -q '"val_bpb"' "$W/s/metrics.jsonl" && ok || bad "metrics.jsonl has no val_bpb"
# Sampling continues a prompt with any characters (BPE has no unknown characters).
out=$("$ATTO" sample --model "$W/s" --prompt "Zebra quux" -n 2 --max-tokens 20 --seed 3)
[[ "$out" == "Zebra quux"* ]] && ok || bad "sample does not start with the prompt: $out"
[ "$("$ATTO" sample --model "$W/s" --prompt "The" -n 2 --max-tokens 20 --seed 3)" == "$out" ] && bad "different prompts gave the same samples" || ok
expect_ok "$ATTO" score --model "$W/s" "The cat"
ids=$(printf 'The cat sat' | "$ATTO" tokenize --model "$W/s")
[ "$(printf '%s\n' "$ids" | "$ATTO" tokenize --model "$W/s" --decode)" == "The cat sat" ] && ok ||
  bad "atto tokenize --model round trip: $ids"
n_ids=$(wc -w <<<"$ids")
[ "$n_ids" -lt 11 ] && ok || bad "'The cat sat' took $n_ids BPE tokens: nothing was merged"
# atto eval: bits per byte (a BPE run has no bits per character).
"$ATTO" eval --model "$W/s" --data "$W/prose.txt" --json >"$W/eval.json"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d['tokenizer']=='bpe' and 0 < d['bits_per_byte'] < 8 and 'bits_per_char' not in d and d['bytes'] > d['tokens'] else 1)" "$W/eval.json" &&
  ok || bad "atto eval --json: $(cat "$W/eval.json")"
# Exact resume (a constant learning rate: a schedule is fixed by the step total): 40 steps then
# 20 more = 60 at once.
C="--schedule constant --warmup 0"
expect_ok "$ATTO" train --data "$W/prose.txt" --mode stream --tokenizer bpe --vocab-size 300 --steps 40 \
  --eval-every 20 $T $C --out "$W/s40"
expect_ok "$ATTO" train --data "$W/prose.txt" --mode stream --tokenizer bpe --vocab-size 300 --steps 60 \
  --eval-every 20 $T $C --out "$W/s60"
expect_ok "$ATTO" train --resume "$W/s40" --steps 60 -q
cmp -s "$W/s40/model.safetensors" "$W/s60/model.safetensors" && ok || bad "resumed BPE run differs from the straight one"
# GGUF: the vocabulary and merges travel; the model reads back with the same samples.
expect_ok "$ATTO" export --model "$W/s" --out "$W/s.gguf"
[ "$("$ATTO" sample --model "$W/s.gguf" --prompt "The" -n 2 --max-tokens 20 --seed 3)" == \
  "$("$ATTO" sample --model "$W/s" --prompt "The" -n 2 --max-tokens 20 --seed 3)" ] && ok ||
  bad "samples from the GGUF export differ"
# atto tokenize --model FILE.gguf reads the vocabulary from the header: the run's ids.
[ "$(printf 'The cat sat' | "$ATTO" tokenize --model "$W/s.gguf")" == "$ids" ] && ok ||
  bad "atto tokenize --model s.gguf differs from the run's ids $ids"

# Lines mode: <|endoftext|> ends each line and each sample.
write_names 500 >"$W/names.txt"
expect_ok "$ATTO" train --data "$W/names.txt" --mode lines --tokenizer bpe --vocab-size 280 --steps 30 $T --out "$W/l"
[ "$(py 'd["special_tokens"]["<|endoftext|>"]' "$W/l/tokenizer.json")" == "$(py 'len(d["vocab"])-1' "$W/l/tokenizer.json")" ] &&
  ok || bad "a lines-mode BPE vocabulary does not end in <|endoftext|>"
lines=$("$ATTO" sample --model "$W/l" -n 5 --seed 1 | wc -l)
[ "$lines" == 5 ] && ok || bad "lines-mode BPE samples: $lines lines, not 5"

# Tokenizers a task cannot use.
expect_fail "a GPT uses char, bpe or spm" "$ATTO" train --data "$W/prose.txt" --tokenizer word $T --steps 1 --out "$W/x"
write_toy "$W"
expect_fail "--tokenizer bpe is for GPTs" "$ATTO" train --task seq2seq --src "$W/toy.src" --tgt "$W/toy.tgt" \
  --tokenizer bpe --steps 1 --threads 1 -q --out "$W/y"
expect_fail "at least 257" "$ATTO" tokenizer train --input "$W/prose.txt" --vocab-size 100 --out "$W/t.json"
finish bpe_gpt
