# Census part: deep nesting, huge values and numbers past a double in every JSON atto reads (the
# run's config.json and tokenizer.json, --config, GPT-2's encoder.json, a safetensors header, the
# token-id JSON on stdin), and what an error echoes back (bounded, no raw control bytes).
# Sourced by test_census.sh (census, $F, $R, $W, $ATTO, variant, ok, bad).
deep() { python3 -c "import sys; n=int(sys.argv[1]); print(sys.argv[2] % ('['*n + ']'*n))" "$@"; }
deep 100000 '%s' >"$F/deep.json"
deep 100000 '{"d_model": %s}' >"$F/deepkey.json"
deep 100000 '{"ids": %s}' >"$F/deepids.json"
python3 -c "print('{\"lr\": \"' + 'x' * 200000 + '\"}')" >"$F/longvalue.json"
printf '{"lr": 1e400}' >"$F/e400.json"
variant deepcfg && deep 100000 '{"format_version": 1, "model": %s}' >"$F/deepcfg/config.json"
variant deeptok && deep 100000 '{"type": "char", "chars": %s}' >"$F/deeptok/tokenizer.json"
variant deepst && python3 - "$F/deepst/model.safetensors" <<'PY'
import struct, sys
h = b'{"a":' + b'[' * 100000 + b']' * 100000 + b'}'
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h)
PY
variant deepstate && python3 - "$F/deepstate/train_state.safetensors" <<'PY'
import json, struct, sys
with open(sys.argv[1], "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    h = f.read(n).decode()
    rest = f.read()
h = h.replace('"__metadata__":{', '"__metadata__":{"deep":' + '[' * 100000 + ']' * 100000 + ',', 1)
h = h.encode()
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + rest)
PY
printf '#version: 0.2\n' >"$F/merges.bpe"
DEEP=$F/deep.json
census "train: --config nested 100,000 deep" "$F/deep.json" "$ATTO" train --data "$F/names.txt" --out "$W/j1" --config "$DEEP"
census "train: --config key nested 100,000 deep" "$F/deepkey.json" "$ATTO" train --data "$F/names.txt" --out "$W/j2" --config "$F/deepkey.json"
census "train: --config 200 KB string value" "$F/longvalue.json" "$ATTO" train --data "$F/names.txt" --out "$W/j3" --config "$F/longvalue.json"
census "train: --config number 1e400" "$F/e400.json" "$ATTO" train --data "$F/names.txt" --out "$W/j4" --config "$F/e400.json"
census "sample: config.json nested 100,000 deep" "$F/deepcfg/config.json" "$ATTO" sample --model "$F/deepcfg"
census "score: config.json nested 100,000 deep" "$F/deepcfg/config.json" "$ATTO" score --model "$F/deepcfg" maria
census "eval: config.json nested 100,000 deep" "$F/deepcfg/config.json" "$ATTO" eval --model "$F/deepcfg" --data "$F/names.txt"
census "inspect: config.json nested 100,000 deep" "$F/deepcfg/config.json" "$ATTO" inspect --model "$F/deepcfg" --text maria --out "$W/j5"
census "export: config.json nested 100,000 deep" "$F/deepcfg/config.json" "$ATTO" export --model "$F/deepcfg" --out "$W/j6.gguf"
census "serve: config.json nested 100,000 deep" "$F/deepcfg/config.json" "$ATTO" serve --model "$F/deepcfg" --port 0
census "resume: config.json nested 100,000 deep" "$F/deepcfg/config.json" "$ATTO" train --resume "$F/deepcfg" --steps 8
census "sample: tokenizer.json nested 100,000 deep" "$F/deeptok/tokenizer.json" "$ATTO" sample --model "$F/deeptok"
census "tokenize: --tokenizer nested 100,000 deep" "$F/deeptok/tokenizer.json" "$ATTO" tokenize --tokenizer "$F/deeptok/tokenizer.json"
census "data prepare: tokenizer nested 100,000 deep" "$F/deeptok/tokenizer.json" "$ATTO" data prepare --model "$F/deeptok" --input "$F/names.txt" --out "$W/j7"
census "tokenizer import-gpt2: encoder.json nested 100,000 deep" "$DEEP" "$ATTO" tokenizer import-gpt2 --encoder "$DEEP" --merges "$F/merges.bpe" --out "$W/j8.json"
census "sample: safetensors header nested 100,000 deep" "$F/deepst/model.safetensors" "$ATTO" sample --model "$F/deepst"
census "resume: train_state metadata nested 100,000 deep" "$F/deepstate/train_state.safetensors" "$ATTO" train --resume "$F/deepstate" --steps 8
census "tokenize --json --decode: stdin nested 100,000 deep" "stdin" bash -c 'exec "$0" "$@" <"'"$F/deepids.json"'"' "$ATTO" tokenize --model "$R" --json --decode

# What an error echoes: at most a few KB, and no raw escape or NUL byte (a GGUF key with ESC and NUL).
out=$("$ATTO" train --data "$F/names.txt" --out "$W/j9" --config "$F/longvalue.json" 2>&1 >/dev/null)
[ ${#out} -lt 2000 ] && ok || bad "a 200 KB config value was echoed back: ${#out} bytes of error"
python3 - "$F/run.gguf" "$F/esc.gguf" <<'PY'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
i = b.find(b"general.architecture")
b[i:i + 7] = b"\x1b[31m\x00l"
open(sys.argv[2], "wb").write(b)
PY
census "sample: GGUF key with ESC and NUL bytes" "$F/esc.gguf" "$ATTO" sample --model "$F/esc.gguf"
out=$("$ATTO" sample --model "$F/esc.gguf" 2>&1 >/dev/null)
if grep -q $'\x1b' <<<"$out"; then bad "a GGUF key's ESC byte reached the terminal: $(cat -v <<<"$out")"; else ok; fi
