#!/usr/bin/env bash
# atto import: a reduced GPT-2 in Hugging Face's layout (written by tests/parity/ref_hf_gpt2.py
# --checkpoint-only: model.safetensors with Conv1D weights, config.json, vocab.json, merges.txt)
# becomes a run directory that atto sample, score, eval and export use; an existing run needs
# --force; bad checkpoints are refused with exit status 1, a message naming the file, and nothing
# written. A GGUF file imports too (--from FILE.gguf). atto export --format hf writes the run back
# in Hugging Face's layout, and importing that scores identically.
ATTO=$1
SRC=$(cd "$(dirname "$0")/../.." && pwd)
source "$SRC/tests/cli/lib.sh"

HF=$W/hf
write_hf_gpt2 "$HF"

expect_ok "$ATTO" import --from "$HF" --out "$W/run"
for f in config.json tokenizer.json model.safetensors; do
  [ -s "$W/run/$f" ] && ok || bad "atto import wrote no $f"
done
[ "$(py 'd["data"]["mode"]' "$W/run/config.json")" == stream ] && ok || bad "the run's data mode is not stream"
[ "$(py 'd["model"]["ffn"]' "$W/run/config.json")" == gelu_tanh ] && ok || bad "gelu_new is not gelu_tanh"
[ "$(py 'len(d["vocab"])' "$W/run/tokenizer.json")" == 264 ] && ok || bad "the vocabulary is not 264 tokens"

# The run works with the commands that load a run.
out=$("$ATTO" sample --model "$W/run" -n 1 --max-tokens 5 --seed 1 --prompt "the hat" 2>&1)
[ $? -eq 0 ] && [[ "$out" == "the hat"* ]] && ok || bad "atto sample on the import: $out"
out=$("$ATTO" score --model "$W/run" "the hat in the hut" 2>&1)
[ $? -eq 0 ] && grep -q '[0-9]' <<<"$out" && ok || bad "atto score on the import: $out"
printf 'the hat in the hut!\nthe rat in the hat.\n' >"$W/text.txt"
expect_ok "$ATTO" eval --model "$W/run" --data "$W/text.txt"
expect_ok "$ATTO" export --model "$W/run" --out "$W/run.gguf"

# --force: an existing run is not overwritten without it.
expect_fail "pass --force" "$ATTO" import --from "$HF" --out "$W/run"
expect_ok "$ATTO" import --from "$HF" --out "$W/run" --force
# A GGUF file imports as well (what atto export wrote from the import).
expect_ok "$ATTO" import --from "$W/run.gguf" --out "$W/from_gguf"
a=$("$ATTO" score --model "$W/run" "the hat in the hut" 2>&1)
b=$("$ATTO" score --model "$W/from_gguf" "the hat in the hut" 2>&1)
[ "$a" == "$b" ] && ok || bad "the GGUF round trip scores differently: $a / $b"

# The way back: atto export --format hf writes the Hugging Face directory again (GPT-2's merges.txt
# as it was), and importing that export scores exactly as the run does.
out=$("$ATTO" export --format hf --model "$W/run" --out "$W/hf_out" 2>&1)
[ $? -eq 0 ] && [[ "$out" == *GPT2LMHeadModel* ]] && ok || bad "atto export --format hf: $out"
[ "$(py 'd["model_type"], d["activation_function"], d["n_head"]' "$W/hf_out/config.json")" == "gpt2 gelu_new 4" ] \
  && ok || bad "the exported config.json: $(cat "$W/hf_out/config.json")"
cmp -s "$HF/merges.txt" "$W/hf_out/merges.txt" && ok || bad "the exported merges.txt differs from GPT-2's"
expect_ok "$ATTO" import --from "$W/hf_out" --out "$W/from_hf"
c=$("$ATTO" score --model "$W/from_hf" "the hat in the hut" 2>&1)
[ "$a" == "$c" ] && ok || bad "the Hugging Face round trip scores differently: $a / $c"
"$ATTO" export --format hf --model "$W/run" --out "$W/hf_out" 2>"$W/err.txt"
rc=$?
[ $rc -eq 1 ] && grep -qF -- "--out $W/hf_out exists and is not empty" "$W/err.txt" && ok \
  || bad "export --format hf into a non-empty --out exits $rc: $(cat "$W/err.txt")"
expect_ok "$ATTO" export --format hf --model "$W/run" --out "$W/hf_out" --force
"$ATTO" export --format hf --type f16 --model "$W/run" --out "$W/hf16" 2>"$W/err.txt"
rc=$?
[ $rc -eq 2 ] && grep -qF -- "--type f16 applies to --format gguf only" "$W/err.txt" && [ ! -e "$W/hf16" ] && ok \
  || bad "export --format hf --type f16 exits $rc: $(cat "$W/err.txt")"

# Errors: exit status 1, the file and the tensor or key named, nothing written.
cp -r "$HF" "$W/no_head"
python3 - "$W/no_head/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); del c["n_head"]; json.dump(c, open(sys.argv[1], "w"))
PY
"$ATTO" import --from "$W/no_head" --out "$W/bad" 2>"$W/err.txt"
rc=$?
[ $rc -eq 1 ] && ok || bad "a config.json without n_head exits $rc, not 1"
grep -qF "$W/no_head/config.json: \"n_head\" is missing" "$W/err.txt" && ok || bad "message: $(cat "$W/err.txt")"
[ ! -e "$W/bad" ] && ok || bad "a failed import wrote $W/bad"
cp -r "$HF" "$W/no_merges"
rm "$W/no_merges/merges.txt"
expect_fail "has no merges.txt" "$ATTO" import --from "$W/no_merges" --out "$W/bad"
expect_fail "is neither a directory" "$ATTO" import --from "$W/text.txt" --out "$W/bad"
"$ATTO" import --from "$HF" 2>/dev/null
[ $? -eq 2 ] && ok || bad "a missing --out is not a usage error (exit 2)"

finish import
