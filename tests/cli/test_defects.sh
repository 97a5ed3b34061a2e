#!/usr/bin/env bash
# Issue 17, points 2, 3, 4 and 9, end to end:
#  2. broken weights: NaN in one weight tensor, or finite weights whose logits overflow, make
#     sample, score, eval and inspect (and translate / eval of a seq2seq run) fail with the
#     non-finite message, never print text;
#  3. unbounded work: /dev/zero or a FIFO as an input file is refused at once; a config.json with
#     block_size / max_len 1000000000 is an error before anything is allocated; sample -n 200000
#     streams its samples in bounded memory;
#  4. stale temporary files of killed saves are removed when a run is opened, a live writer's kept;
#  9. eval --hyp/--ref scores given translations with BLEU and chrF (sacreBLEU's README example);
# and OpenBLAS never runs its Prescott (SSE3) fallback kernels under atto on a CPU with AVX2 (an
# OpenBLAS older than the CPU falls back to them; atto restarts itself with OPENBLAS_CORETYPE).
# Usage: test_defects.sh PATH/TO/atto
set -u
ATTO=${1:?usage: test_defects.sh path/to/atto}
. "$(dirname "$0")/lib.sh"
SLEEPER=
trap '[ -n "$SLEEPER" ] && kill "$SLEEPER" 2>/dev/null; rm -rf "$W"' EXIT
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}

# poke FILE TENSOR VALUE [FIRST [COUNT]]: sets elements [FIRST, FIRST + COUNT) of an F32 tensor
# of a safetensors file (all of it by default) to VALUE, in place, from the header's offsets.
poke() {
  python3 - "$@" <<'EOF'
import json, struct, sys
path, name, value = sys.argv[1], sys.argv[2], float(sys.argv[3])
with open(path, "r+b") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    entry = json.loads(f.read(n))[name]
    begin, end = entry["data_offsets"]
    first = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    count = int(sys.argv[5]) if len(sys.argv) > 5 else (end - begin) // 4 - first
    f.seek(8 + n + begin + 4 * first)
    f.write(struct.pack("<f", value) * count)
EOF
}
# set_key RUN SECTION KEY VALUE: edits config.json.
set_key() {
  python3 - "$@" <<'EOF'
import json, sys
path = sys.argv[1] + "/config.json"
c = json.load(open(path))
c[sys.argv[2]][sys.argv[3]] = json.loads(sys.argv[4])
json.dump(c, open(path, "w"), indent=2)
EOF
}

# ---- runs the tests use ------------------------------------------------------------------------
write_names >"$W/names.txt"
write_toy "$W"
SMALL=(--n-layers 1 --d-model 16 --n-heads 2 --batch-size 8 --steps 20 --eval-every 10 --log-every 10 -q)
RUN="$W/run"
expect_ok "$ATTO" train --data "$W/names.txt" --out "$RUN" "${SMALL[@]}"
expect_ok "$ATTO" train --data "$W/names.txt" --out "$W/sin" --pos sinusoidal "${SMALL[@]}"
S2S="$W/s2s"
expect_ok "$ATTO" train --task seq2seq --src "$W/toy.src" --tgt "$W/toy.tgt" --tokenizer word --d-model 12 --n-heads 3 \
  --n-enc-layers 1 --n-dec-layers 1 --d-ff 12 --steps 20 --eval-bleu 0 --out "$S2S" -q

# ---- 2. broken weights -------------------------------------------------------------------------
# NaN in one weight tensor (every element of ln_1's weight): the old sample printed samples and
# exited 0 (attention takes a row of NaN scores for a fully masked one, so its logits stayed
# finite). Loading refuses the tensor by name.
cp -r "$RUN" "$W/nan"
poke "$W/nan/model.safetensors" transformer.h.0.ln_1.weight nan
expect_fail "tensor 'transformer.h.0.ln_1.weight' holds non-finite values" "$ATTO" sample --model "$W/nan" -n 3
expect_fail "non-finite" "$ATTO" score --model "$W/nan" mari
expect_fail "non-finite" "$ATTO" eval --model "$W/nan" --data "$W/names.txt"
expect_fail "non-finite" "$ATTO" inspect --model "$W/nan" --text ma --out "$W/nan-report"
# Finite weights whose logits overflow (ln_f gives all ones, one lm_head row holds 3e38): every
# command refuses them with the one message. The old eval printed "loss nan" and exited 0; the old
# sample, score and inspect worded it differently.
cp -r "$RUN" "$W/inf"
M="$W/inf/model.safetensors"
poke "$M" transformer.ln_f.weight 0
poke "$M" transformer.ln_f.bias 1
poke "$M" lm_head.weight 3e38 32 16  # row 2 (d_model 16)
expect_fail "the model produced non-finite logits while sampling; the weights may be damaged" \
  "$ATTO" sample --model "$W/inf" -n 3
expect_fail "the model produced non-finite logits while scoring" "$ATTO" score --model "$W/inf" mari
expect_fail "the model produced non-finite logits while evaluating" "$ATTO" eval --model "$W/inf" --data "$W/names.txt"
expect_fail "the model produced non-finite logits while inspecting" \
  "$ATTO" inspect --model "$W/inf" --text ma --out "$W/inf-report"
# seq2seq: NaN in a weight is refused at load, naming the tensor, as for the GPT; finite weights
# that overflow (3e38 in the decoder's FFN norm) give non-finite logits, which greedy and beam
# decoding and eval refuse.
cp -r "$S2S" "$W/s2s-nan"
poke "$W/s2s-nan/model.safetensors" decoder.layers.0.ln_3.weight nan
expect_fail "tensor 'decoder.layers.0.ln_3.weight' holds non-finite values" \
  "$ATTO" translate --model "$W/s2s-nan" --input "$W/toy.src"
cp -r "$S2S" "$W/s2s-inf"
poke "$W/s2s-inf/model.safetensors" decoder.layers.0.ln_3.weight 3e38
expect_fail "the model produced non-finite logits" "$ATTO" translate --model "$W/s2s-inf" --input "$W/toy.src"
expect_fail "the model produced non-finite logits" "$ATTO" translate --model "$W/s2s-inf" --beam 1 --input "$W/toy.src"
expect_fail "the model produced non-finite logits" \
  "$ATTO" eval --model "$W/s2s-inf" --src "$W/toy.src" --ref "$W/toy.tgt"

# ---- 3. inputs that never end or block -----------------------------------------------------------
mkfifo "$W/fifo"
for f in /dev/zero "$W/fifo"; do
  expect_fail "data file '$f' is" timeout 20 "$ATTO" train --data "$f" --out "$W/x" -q
  expect_fail "not a regular file" timeout 20 "$ATTO" train --task seq2seq --src "$f" --tgt "$W/toy.tgt" --out "$W/x" -q
  expect_fail "not a regular file" timeout 20 "$ATTO" train --task seq2seq --src "$W/toy.src" --tgt "$f" --out "$W/x" -q
  expect_fail "not a regular file" timeout 20 "$ATTO" train --config "$f" --data "$W/names.txt" --out "$W/x" -q
  expect_fail "not a regular file" timeout 20 "$ATTO" eval --model "$RUN" --data "$f"
  expect_fail "not a regular file" timeout 20 "$ATTO" score --model "$RUN" --file "$f"
  expect_fail "--input file '$f' is" timeout 20 "$ATTO" translate --model "$S2S" --input "$f"
  expect_fail "not a regular file" timeout 20 "$ATTO" eval --model "$S2S" --src "$f" --ref "$W/toy.tgt"
  expect_fail "not a regular file" timeout 20 "$ATTO" eval --model "$S2S" --src "$W/toy.src" --ref "$f"
  expect_fail "--hyp file '$f' is" timeout 20 "$ATTO" eval --hyp "$f" --ref "$W/toy.tgt"
done
[ ! -e "$W/x" ] && ok || bad "a refused input still created a run directory"
got=$(printf 'hello messi\n' | "$ATTO" translate --model "$S2S" 2>&1) && ok || bad "translate from stdin failed: $got"

# A damaged config.json: an error naming the file, the key, the value and the tensor's shape,
# at once and within 4 GB of address space (the old loader built the model first: a [1e9, 16]
# position table, or the KV cache of sinusoidal positions).
cp -r "$RUN" "$W/big"
set_key "$W/big" model block_size 1000000000
for cmd in "sample --model $W/big -n 2" "score --model $W/big mari" "eval --model $W/big --data $W/names.txt" \
           "inspect --model $W/big --text ma --out $W/big-report"; do
  # shellcheck disable=SC2086
  expect_fail "block_size is 1000000000, but tensor 'transformer.wpe.weight'" \
    bash -c "$LIMIT_AS exec timeout 20 $ATTO $cmd"
done
shape=$(python3 -c 'import json, struct, sys; f = open(sys.argv[1], "rb"); n = struct.unpack("<Q", f.read(8))[0]
print(json.loads(f.read(n))["transformer.wpe.weight"]["shape"])' "$RUN/model.safetensors")
expect_fail "in $W/big/model.safetensors has shape $shape" \
  bash -c "$LIMIT_AS exec timeout 20 $ATTO sample --model $W/big -n 2"
cp -r "$W/sin" "$W/bigsin"
set_key "$W/bigsin" model block_size 1000000000
expect_fail "block_size is 1000000000, outside [1, 65536], atto's limit on positions (sinusoidal positions have" \
  bash -c "$LIMIT_AS exec timeout 20 $ATTO sample --model $W/bigsin -n 2"
cp -r "$S2S" "$W/bigs2s"
set_key "$W/bigs2s" model max_len 1000000000
expect_fail "max_len is 1000000000, outside [1, 65536], atto's limit on positions" \
  bash -c "$LIMIT_AS exec timeout 20 $ATTO translate --model $W/bigs2s --input $W/toy.src"
cp -r "$S2S" "$W/layers"
set_key "$W/layers" model n_dec_layers 40
expect_fail "n_dec_layers is 40, but" "$ATTO" translate --model "$W/layers" --input "$W/toy.src"

# sample -n 200000 streams: its peak memory under a 4 GB address-space limit is that of -n 2000
# (chunks of 256; the old one kept every sample: 11 MB at 2000, 44 MB at 200000), and its first
# line comes long before the end (the old one printed nothing until all were done).
run_sample() {  # run_sample N: "peak RSS (KiB) wall seconds" of sample -n N --max-tokens 5
  bash -c "$LIMIT_AS exec /usr/bin/time -f '%M %e' $ATTO sample --model $RUN -n $1 --max-tokens 5" 2>&1 \
    >/dev/null | tail -n 1
}
read -r small _ <<<"$(run_sample 2000)"
read -r large all_s <<<"$(run_sample 200000)"
# (Not under AddressSanitizer: its quarantine keeps up to 256 MB of freed blocks resident.)
[ "$ATTO_ASAN" = 1 ] || { [ "$large" -lt $((small + small / 4 + 4096)) ] && ok ||
  bad "peak RSS grows with -n: $small KiB at 2000, $large KiB at 200000"; }
start=$(date +%s%N)
first=$(bash -c "$LIMIT_AS exec $ATTO sample --model $RUN -n 200000 --max-tokens 5" 2>/dev/null | head -n 1)
first_ms=$((($(date +%s%N) - start) / 1000000))
all_ms=$(awk -v s="$all_s" 'BEGIN { printf "%d", s * 1000 }')
[ -n "$first" ] && ok || bad "sample -n 200000 printed no first line"
[ $((first_ms * 4)) -lt "$all_ms" ] && ok || bad "sample -n 200000: the first line took $first_ms ms of $all_ms ms"
# Chunks do not depend on the thread count; --json stays one valid object; --report counts all.
a=$("$ATTO" sample --model "$RUN" -n 600 --max-tokens 4 --threads 1)
b=$("$ATTO" sample --model "$RUN" -n 600 --max-tokens 4 --threads 2)
[ "$a" = "$b" ] && [ "$(wc -l <<<"$a")" -eq 600 ] && ok || bad "sample -n 600 differs between 1 and 2 threads"
"$ATTO" sample --model "$RUN" -n 600 --max-tokens 4 --json --report --threads 1 >"$W/s.json" 2>/dev/null
python3 - "$W/s.json" "$a" <<'EOF' && ok || bad "sample --json --report: not one valid object with 600 samples"
import json, sys
j = json.load(open(sys.argv[1]))
texts = [s["text"] for s in j["samples"]]
assert j["mode"] == "lines" and j["seed"] == 1337 and len(texts) == 600, j.keys()
assert texts == sys.argv[2].split("\n"), "json texts differ from the text output"
assert all(set(s) == {"text", "prompt_ids", "ids", "stopped"} for s in j["samples"])
assert sum(j["novelty"].values()) == 600, j["novelty"]
EOF

# ---- 4. stale temporary files ----------------------------------------------------------------------
true &
dead=$!
wait "$dead"
sleep 60 &
SLEEPER=$!
for f in "model.safetensors.tmp.$dead.0" "train_state.safetensors.tmp.$dead.3" "model.safetensors.tmp.$SLEEPER.1"; do
  echo partial >"$RUN/$f"
done
expect_ok "$ATTO" train --resume "$RUN" --steps 25 -q
[ ! -e "$RUN/model.safetensors.tmp.$dead.0" ] && [ ! -e "$RUN/train_state.safetensors.tmp.$dead.3" ] && ok ||
  bad "resume left stale temporary files: $(ls "$RUN")"
[ -e "$RUN/model.safetensors.tmp.$SLEEPER.1" ] && ok || bad "resume removed the temporary file of a live process"
echo partial >"$RUN/config.json.tmp.$dead.9"
expect_ok "$ATTO" sample --model "$RUN" -n 1
[ ! -e "$RUN/config.json.tmp.$dead.9" ] && [ -e "$RUN/model.safetensors.tmp.$SLEEPER.1" ] && ok ||
  bad "loading a run did not remove only the stale temporary file: $(ls "$RUN")"
kill "$SLEEPER"
wait "$SLEEPER" 2>/dev/null
SLEEPER=

# ---- 9. eval --hyp --ref: metrics without a model --------------------------------------------------
# sacreBLEU's README example (tests/metrics: BLEU 48.530827, chrF2 59.73 with two references).
printf "The dog bit the man.\nIt wasn't surprising.\nThe man had just bitten him.\n" >"$W/hyp"
printf 'The dog bit the man.\nIt was not unexpected.\nThe man bit him first.\n' >"$W/ref1"
printf 'The dog had bit the man.\nNo one was surprised.\nThe man had bitten the dog.\n' >"$W/ref2"
out=$("$ATTO" eval --hyp "$W/hyp" --ref "$W/ref1" --ref "$W/ref2" 2>&1)
want="BLEU|nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:atto = 48.53 82.4/50.0/45.5/37.5"
grep -qxF "$want (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)" <<<"$out" && ok || bad "eval --hyp BLEU line: $out"
grep -qxF "chrF2|nrefs:2|case:mixed|eff:yes|nc:6|nw:0|space:no|version:atto = 59.73" <<<"$out" && ok ||
  bad "eval --hyp chrF line: $out"
"$ATTO" eval --hyp "$W/hyp" --ref "$W/ref1" --ref "$W/ref2" --json >"$W/m.json"
python3 - "$W/m.json" <<'EOF' && ok || bad "eval --hyp --json: $(cat "$W/m.json")"
import json, sys
j = json.load(open(sys.argv[1]))
assert abs(j["bleu"] - 48.530827) < 1e-6 and round(j["chrf"], 2) == 59.73 and j["sentences"] == 3, j
assert j["bleu_signature"].startswith("nrefs:2|") and j["chrf_signature"].startswith("nrefs:2|"), j
EOF
out=$("$ATTO" eval --hyp "$W/ref1" --ref "$W/ref1" 2>&1)
grep -qF "= 100.00 100.0/100.0/100.0/100.0" <<<"$out" && ok || bad "eval --hyp of the reference itself: $out"
head -n 2 "$W/ref2" >"$W/short"
expect_fail "--hyp file '$W/hyp' has 3 lines but --ref file '$W/short' has 2" \
  "$ATTO" eval --hyp "$W/hyp" --ref "$W/ref1" --ref "$W/short"
expect_fail "--hyp needs --ref" "$ATTO" eval --hyp "$W/hyp"
expect_fail "takes no --model" "$ATTO" eval --hyp "$W/hyp" --ref "$W/ref1" --model "$RUN"
expect_fail "does not exist" "$ATTO" eval --hyp "$W/none" --ref "$W/ref1"

# OpenBLAS's kernels: what OpenBLAS itself reports (OPENBLAS_VERBOSE=2: "Core: NAME") as atto runs.
if grep -qw avx2 /proc/cpuinfo; then
  core=$(env -u OPENBLAS_CORETYPE OPENBLAS_VERBOSE=2 "$ATTO" --version 2>&1 | sed -n 's/.*Core: *//p' | tail -n 1)
  [ -n "$core" ] && [ "$core" != Prescott ] && ok || bad "OpenBLAS runs '$core' kernels under atto on a CPU with AVX2"
  core=$(OPENBLAS_CORETYPE=Haswell OPENBLAS_VERBOSE=2 "$ATTO" --version 2>&1 | sed -n 's/.*Core: *//p' | tail -n 1)
  [ "$core" = Haswell ] && ok || bad "a user's OPENBLAS_CORETYPE=Haswell was not kept: OpenBLAS runs '$core'"
fi

finish defects
