#!/usr/bin/env bash
# atto's GGUF export against the real llama.cpp (npm's node-llama-cpp, installed into the build
# tree by tests/gguf/install.sh): for lines-mode models with non-ASCII characters (gpt2 layout with
# erf and tanh GELU; llama layout: RMSNorm, SwiGLU, RoPE, grouped-query attention, RoPE base
# 500000; byte-level BPE; SentencePiece) and stream-mode models of
# both layouts and of BPE, exported f32, f16 and q8_0 (q4_0, the k-quants, q5_0, q5_1, q4_1 and
# bf16 for some of them):
#   - llama.cpp tokenizes 200 training lines to atto's ids;
#   - llama.cpp's log-probabilities of every next token equal `atto score`'s within a bound per
#     type (printed: the measured maximum);
#   - greedy generation of 100 tokens (stream model, f32) is the same token for token;
#   - atto reading the GGUF back scores exactly as the run directory (f32);
#   - q4_0, k-quant (q3_k_m, q4_k_m, q5_k_m too), q5_0, q5_1, q4_1 and bf16 files: llama.cpp's log-probabilities are atto's
#     reading the same file;
#   - LoRA runs over the tanh (gpt2) and llama models: llama.cpp loading the base's GGUF plus the
#     adapter GGUF (`atto export --lora-only`) gives the merged model's log-probabilities.
ATTO=$1
SRC=$(cd "$(dirname "$0")/../.." && pwd)
source "$SRC/tests/cli/lib.sh"
BUILD=$(cd "$(dirname "$ATTO")" && pwd)
NODE_DIR=$BUILD/node
if ! out=$(bash "$SRC/tests/gguf/install.sh" "$NODE_DIR" 2>&1); then
  echo "FAIL: installing node-llama-cpp (tests/gguf/install.sh $NODE_DIR): $out"
  exit 1
fi
REF=(node "$SRC/tests/gguf/llama_ref.mjs")
export NODE_PATH=$NODE_DIR/node_modules

# Lines data: syllable names plus names with accents and other scripts.
{ write_names 600; printf 'zoë\nbjörn\nñuño\nçelik\nmárta\nsøren\nαλέξης\nдмитрий\n'; } >"$W/names.txt"
head -n 200 "$W/names.txt" | tail -n 192 >"$W/lines.txt"
tail -n 8 "$W/names.txt" >>"$W/lines.txt"
# Stream data: the corpus if present, else a generated text with some structure.
if [ -f "$SRC/../shared/data/tinyshakespeare.txt" ]; then
  head -c 60000 "$SRC/../shared/data/tinyshakespeare.txt" >"$W/stream.txt"
else
  for i in $(seq 1 400); do echo "the cat sat on the mat number $((i % 17)) and the dog ran $((i % 5)) times."; done >"$W/stream.txt"
fi

common=(--d-model 32 --n-heads 2 --n-layers 2 --threads 1 --batch-size 16 --lr 0.01 --warmup 10 --eval-every 100 -q)
expect_ok "$ATTO" train --data "$W/names.txt" --out "$W/erf" --steps 120 "${common[@]}"
expect_ok "$ATTO" train --data "$W/names.txt" --out "$W/tanh" --steps 120 --ffn gelu_tanh "${common[@]}"
llama=(--norm rmsnorm --ffn swiglu --pos rope --no-bias)  # llama.cpp's llama architecture
# The names model of the llama layout: grouped-query attention (one key/value head for the two
# query heads) and Llama 3's RoPE base; the stream one is multi-head with the default base.
expect_ok "$ATTO" train --data "$W/names.txt" --out "$W/llama" --steps 120 "${llama[@]}" --n-kv-heads 1 \
  --rope-base 500000 "${common[@]}"
expect_ok "$ATTO" train --data "$W/stream.txt" --mode stream --block-size 128 --out "$W/stream" --steps 120 \
  --ffn gelu_tanh "${common[@]}"
expect_ok "$ATTO" train --data "$W/stream.txt" --mode stream --block-size 128 --out "$W/stream_llama" --steps 120 \
  "${llama[@]}" "${common[@]}"
# SentencePiece (--tokenizer spm, llama layout): pieces, scores and types go to llama.cpp's llama
# (SentencePiece) tokenizer; byte fallback for the characters training did not see.
expect_ok "$ATTO" train --data "$W/names.txt" --out "$W/spm" --steps 120 --tokenizer spm --vocab-size 400 \
  "${llama[@]}" "${common[@]}"
expect_ok "$ATTO" train --data "$W/stream.txt" --mode stream --block-size 128 --out "$W/stream_spm" --steps 120 \
  --tokenizer spm --vocab-size 600 "${llama[@]}" "${common[@]}"
# Byte-level BPE (--tokenizer bpe): the vocabulary and merges go to llama.cpp's own gpt2 tokenizer.
expect_ok "$ATTO" train --data "$W/names.txt" --out "$W/bpe" --steps 120 --tokenizer bpe --vocab-size 320 "${common[@]}"
expect_ok "$ATTO" train --data "$W/stream.txt" --mode stream --block-size 128 --out "$W/stream_bpe" --steps 120 \
  --tokenizer bpe --vocab-size 400 "${common[@]}"

# Compares atto's and llama.cpp's JSON outputs; prints what it measured, exits 1 on a mismatch.
compare() {
  python3 - "$@" <<'EOF'
import json, sys
kind = sys.argv[1]
if kind == "tokens":  # atto score --json (lines: targets = ids + <eos>) vs llama tokenize
    atto = [t["tokens"] for t in json.load(open(sys.argv[2]))["texts"]]
    llama = json.load(open(sys.argv[3]))["tokens"]
    ids = [[x["id"] for x in t][:-1] for t in atto]
    bad = [i for i, (a, b) in enumerate(zip(ids, llama)) if a != b]
    if len(ids) != len(llama) or bad:
        print(f"tokenization differs on {len(bad)} of {len(ids)} lines, first: line {bad[:1]}: atto "
              f"{ids[bad[0]] if bad else ''} llama {llama[bad[0]] if bad else ''}")
        sys.exit(1)
    print(f"tokenization: {len(ids)} lines identical")
elif kind == "seqs":  # atto score --json -> the token sequences to evaluate: [boundary] + targets
    atto = json.load(open(sys.argv[2]))
    start = int(sys.argv[4])
    seqs = [[start] + [x["id"] for x in t["tokens"]] for t in atto["texts"]]
    json.dump(seqs, open(sys.argv[3], "w"))
elif kind == "logprobs":  # atto score --json vs llama logprobs (targets), within a bound
    atto = [[x["logprob"] for x in t["tokens"]] for t in json.load(open(sys.argv[2]))["texts"]]
    llama = json.load(open(sys.argv[3]))["targets"]
    bound, label = float(sys.argv[4]), sys.argv[5]
    worst = max(abs(a - b) for sa, sb in zip(atto, llama) for a, b in zip(sa, sb))
    n = sum(len(s) for s in atto)
    ok = len(atto) == len(llama) and all(len(a) == len(b) for a, b in zip(atto, llama)) and worst <= bound
    print(f"{label}: max |atto - llama.cpp| log p = {worst:.2e} over {n} tokens (bound {bound:g})")
    sys.exit(0 if ok else 1)
elif kind == "greedy":  # atto sample --json --greedy vs llama generate
    a = json.load(open(sys.argv[2]))["samples"][0]["ids"]
    l = json.load(open(sys.argv[3]))["generated"][0]
    if a != l:
        print(f"greedy generation differs: atto {a[:20]}... llama.cpp {l[:20]}...")
        sys.exit(1)
    print(f"greedy generation: {len(a)} tokens identical")
elif kind == "moved":  # two atto score --json outputs differ by more than a bound somewhere
    a, b = ([[x["logprob"] for x in t["tokens"]] for t in json.load(open(f))["texts"]] for f in sys.argv[2:4])
    moved = max(abs(x - y) for sa, sb in zip(a, b) for x, y in zip(sa, sb))
    print(f"{sys.argv[5]}: max |change| of log p = {moved:.2e} (must exceed {sys.argv[4]})")
    sys.exit(0 if moved > float(sys.argv[4]) else 1)
EOF
}

check() {  # check <description> <command...>: counts a comparison
  local what=$1 out
  shift
  if out=$("$@" 2>&1); then ok; echo "  $out"; else bad "$what: $out"; fi
}

for model in erf tanh llama bpe spm; do
  "$ATTO" score --model "$W/$model" --file "$W/lines.txt" --json >"$W/$model.score.json"
  boundary=0  # <eos>; a BPE vocabulary's <|endoftext|> is its last token; SentencePiece's </s> is 2
  [ $model = spm ] && boundary=2
  [ $model = bpe ] && boundary=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["special_tokens"]["<|endoftext|>"])' "$W/bpe/tokenizer.json")
  compare seqs "$W/$model.score.json" "$W/$model.seqs.json" $boundary
  for type in f32 f16 q8_0; do
    g=$W/$model.$type.gguf
    expect_ok "$ATTO" export --model "$W/$model" --format gguf --type $type --out "$g"
    if [ $type = f32 ]; then
      "${REF[@]}" tokenize --model "$g" --input "$W/lines.txt" >"$W/tok.json" || bad "llama_ref tokenize failed"
      check "tokenization ($model)" compare tokens "$W/$model.score.json" "$W/tok.json"
      "$ATTO" score --model "$g" --file "$W/lines.txt" --json >"$W/back.json"
      cmp -s <(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["texts"])' "$W/back.json") \
        <(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["texts"])' "$W/$model.score.json") &&
        ok || bad "atto scores of $g differ from those of the run directory"
    fi
    "${REF[@]}" logprobs --model "$g" --input "$W/$model.seqs.json" >"$W/lp.json" || bad "llama_ref logprobs failed"
    # f32, gpt2 layout: llama.cpp computes GELU in tanh form through an f16 table (measured
    # 6.7e-4 for an erf model, 4.4e-4 for a tanh one); llama layout (no GELU): 2e-6 measured.
    # f16 measured 1.5e-3; q8_0 (llama.cpp also rounds the activations to 8 bits) 2-7e-2.
    case $model.$type in
      llama.f32 | spm.f32) bound=1e-4 ;; *.f32) bound=1e-3 ;; *.f16) bound=1e-2 ;; *.q8_0) bound=1e-1 ;;
    esac
    check "log-probabilities ($model, $type)" compare logprobs "$W/$model.score.json" "$W/lp.json" $bound "$model $type"
  done
done

# q8_0 and q4_0 (every matrix: d_model 32 fills its blocks of 32): llama.cpp against atto reading
# the SAME file, so both start from the same weights, and both round the activations to int8 per
# block of 32 for those products (atto's integer kernels keep each block's scale in f32, ggml
# rounds it to f16; Q4_K in integers too, per sub-block of 32): measured 1.7e-2 and 2.9e-2 (tanh
# and llama q8_0: the run directory's floats against the same q8_0 file, above, gave 2.3e-2 and
# 8.0e-2), 2.3e-2 and 1.9e-2 (q4_0), 3.3e-2 (llama256 q4_k; 3.8e-2 when atto converted Q4_K to
# floats); the bound, 0.11, is 3x the largest.
# q4_k, q6_k and q4_k_m: a llama-layout model with d_ff 256, whose ffn_down rows fill the
# super-blocks (the other matrices, rows of 32, are q8_0); llama.cpp reads atto's Q4_K and Q6_K
# bytes as atto does, and Q5_K's (q5_k, q5_k_m) and Q3_K's (q3_k, q3_k_m). q5_0, q5_1, q4_1 (as
# integers too) and bf16 (floats) likewise: measured 1.4-3.8e-2 (bf16 3.8e-3 to 7.5e-3), where the
# same files against the run directory's floats differ by 6e-2 to 2.4e-1.
expect_ok "$ATTO" train --data "$W/names.txt" --out "$W/llama256" --steps 60 "${llama[@]}" --d-ff 256 "${common[@]}"
"$ATTO" score --model "$W/llama256" --file "$W/lines.txt" --json >"$W/llama256.score.json"
compare seqs "$W/llama256.score.json" "$W/llama256.seqs.json" 0
for mt in tanh.q8_0 llama.q8_0 tanh.q4_0 llama.q4_0 llama256.q4_k llama256.q6_k llama256.q4_k_m llama256.q5_k \
  llama256.q5_k_m llama256.q3_k llama256.q3_k_m llama256.q5_0 tanh.q5_1 llama256.q4_1 tanh.bf16; do
  model=${mt%%.*} type=${mt#*.}
  g=$W/$mt.gguf
  expect_ok "$ATTO" export --model "$W/$model" --format gguf --type $type --out "$g"
  "$ATTO" score --model "$g" --file "$W/lines.txt" --json >"$W/$mt.score.json"
  "${REF[@]}" logprobs --model "$g" --input "$W/$model.seqs.json" >"$W/lp.json" || bad "llama_ref logprobs failed ($mt)"
  check "log-probabilities ($model, $type read by both)" compare logprobs "$W/$mt.score.json" "$W/lp.json" \
    0.11 "$model $type, atto reading the same file"
done

# LoRA adapters: a few steps at a high learning rate over the tanh (gpt2) and llama models, every
# target, so that B is far from zero; llama.cpp runs the base's GGUF (exported above) with the
# adapter GGUF and must give the merged model's log-probabilities (`atto score` of the LoRA run).
# (The tanh model: llama.cpp's GELU is the tanh form, and the adapters' larger activations would
# bring an erf model's GELU difference, 6.7e-4 above, to ~1e-3; measured with tanh: see docs/gguf.md.)
for model in tanh llama; do
  lora=$W/$model.lora
  expect_ok "$ATTO" train --init-from "$W/$model" --data "$W/names.txt" --out "$lora" --steps 20 --lora-rank 4 \
    --lora-alpha 8 --lora-targets qkv,proj,fc,fc2 --lr 1e-2 --warmup 2 --eval-every 20 --threads 1 --batch-size 16 -q
  expect_ok "$ATTO" export --model "$lora" --lora-only --out "$lora.gguf"
  "$ATTO" score --model "$lora" --file "$W/lines.txt" --json >"$lora.score.json"
  check "the adapter changes the model ($model)" compare moved "$W/$model.score.json" "$lora.score.json" 1e-2 \
    "$model + LoRA vs $model (atto)"
  "${REF[@]}" logprobs --model "$W/$model.f32.gguf" --lora "$lora.gguf" --input "$W/$model.seqs.json" >"$W/lp.json" ||
    bad "llama_ref logprobs --lora failed ($model)"
  bound=1e-3; [ $model = llama ] && bound=1e-4  # as the f32 exports above
  check "LoRA log-probabilities ($model)" compare logprobs "$lora.score.json" "$W/lp.json" $bound "$model + LoRA adapter"
done
expect_fail "is not a LoRA run" "$ATTO" export --model "$W/tanh" --lora-only --out "$W/x.gguf"
expect_fail "--lora-only and --merge-lora conflict" "$ATTO" export --model "$W/tanh.lora" --lora-only --merge-lora \
  --out "$W/x.gguf"
expect_fail "--type must be f32" "$ATTO" export --model "$W/tanh.lora" --lora-only --type f16 --out "$W/x.gguf"
expect_fail "--format must be gguf" "$ATTO" export --model "$W/tanh.lora" --lora-only --format hf --out "$W/x"
expect_fail "or --lora-only" "$ATTO" export --model "$W/tanh.lora" --out "$W/x.gguf"
[ ! -e "$W/x.gguf" ] && [ ! -e "$W/x" ] && ok || bad "a refused --lora-only export wrote a file"

# greedy_check RUN GGUF PROMPT N LABEL: atto's greedy N tokens after PROMPT are llama.cpp's.
greedy_check() {
  "$ATTO" sample --model "$1" --prompt "$3" -n 1 --greedy --max-tokens "$4" --json >"$W/greedy.json"
  python3 -c 'import json,sys; print(json.dumps([json.load(open(sys.argv[1]))["samples"][0]["prompt_ids"]]))' \
    "$W/greedy.json" >"$W/prompt.json"
  "${REF[@]}" generate --model "$2" --input "$W/prompt.json" --max-tokens "$4" >"$W/lgen.json" ||
    bad "llama_ref generate failed ($5)"
  check "greedy generation ($5)" compare greedy "$W/greedy.json" "$W/lgen.json"
}

# The import round trip: a reduced GPT-2 in Hugging Face's layout (tests/parity/ref_hf_gpt2.py)
# -> atto import -> atto export (GGUF) -> llama.cpp: its log-probabilities and greedy text are
# atto's (the block is 16: short texts). Bound 3e-3: llama.cpp's GELU goes through an f16 table,
# and this checkpoint's random weights give larger activations than the trained models above
# (measured 1.78e-3).
write_hf_gpt2 "$W/hf"
expect_ok "$ATTO" import --from "$W/hf" --out "$W/imported"
expect_ok "$ATTO" export --model "$W/imported" --out "$W/imported.gguf"
printf 'the hat\na rat sat\nthe hut!\n' >"$W/hat.txt"
"$ATTO" score --model "$W/imported" --file "$W/hat.txt" --json >"$W/imported.score.json"
eot=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["special_tokens"]["<|endoftext|>"])' \
  "$W/imported/tokenizer.json")
compare seqs "$W/imported.score.json" "$W/imported.seqs.json" "$eot"
"${REF[@]}" logprobs --model "$W/imported.gguf" --input "$W/imported.seqs.json" >"$W/lp.json" ||
  bad "llama_ref logprobs failed (imported)"
check "log-probabilities (Hugging Face GPT-2 imported)" compare logprobs "$W/imported.score.json" "$W/lp.json" 3e-3 \
  "HF -> atto -> GGUF"
greedy_check "$W/imported" "$W/imported.gguf" "the hat" 6 "Hugging Face GPT-2 imported"

# Greedy generation, stream models (block 128) of both architectures and of BPE: a 20-character
# prompt, 100 new tokens.
prompt=$(head -c 20 "$W/stream.txt" | tr '\n' ' ')
for model in stream stream_llama stream_bpe stream_spm; do
  expect_ok "$ATTO" export --model "$W/$model" --format gguf --type f32 --out "$W/$model.gguf"
  greedy_check "$W/$model" "$W/$model.gguf" "$prompt" 100 "$model"
done
finish llamacpp
