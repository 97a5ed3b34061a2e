#!/usr/bin/env bash
# Corpora larger than memory: atto data prepare streams text through a tokenizer into token
# files; atto train --data DIR trains from them (random windows read from the files), resumes,
# and its resident memory does not grow with the corpus (a 24 MB corpus against a 0.5 MB one);
# damaged token files and a tokenizer that does not fit are named errors.
ATTO=$1
SRC=$(cd "$(dirname "$0")/../.." && pwd)
source "$SRC/tests/cli/lib.sh"

python3 - "$W" <<'PY'
import random, sys
w = sys.argv[1]
rng = random.Random(3)
words = "the a cat dog sat ran on under mat log river tree house king queen spoke said was is \u00e9t\u00e9 na\u00efve".split()
def para():
    return "\n".join(" ".join(rng.choice(words) for _ in range(rng.randint(4, 12))) + "." for _ in range(rng.randint(1, 4)))
with open(f"{w}/small.txt", "w") as f:
    while f.tell() < 500_000: f.write(para() + "\n\n")
with open(f"{w}/big.txt", "w") as f:
    while f.tell() < 24_000_000: f.write(para() + "\n\n")
PY
expect_ok "$ATTO" tokenizer train --input "$W/small.txt" --vocab-size 400 --out "$W/tok.json"
expect_ok "$ATTO" data prepare --tokenizer "$W/tok.json" --input "$W/small.txt" --out "$W/small" --val-fraction 0.05
expect_ok "$ATTO" data prepare --tokenizer "$W/tok.json" --input "$W/big.txt" --out "$W/big" --val-fraction 0.005
for f in train.bin val.bin tokenizer.json meta.json; do [ -f "$W/big/$f" ] && ok || bad "prepare wrote no $f"; done

# Training from the prepared corpora; peak resident memory measured by the parent (no GNU time needed).
T=(--d-model 32 --n-heads 2 --n-layers 2 --block-size 64 --batch-size 16 --threads 1 --eval-every 25 --eval-batches 4
  --schedule constant --warmup 0 -q)
rss() {  # rss OUT ARGS...: runs atto, prints its peak resident memory in kB
  python3 - "$ATTO" "$@" <<'PY'
import resource, subprocess, sys
r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
if r.returncode: sys.exit("atto failed: " + r.stderr)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
PY
}
small=$(rss train --data "$W/small" "${T[@]}" --steps 100 --out "$W/rs")
big=$(rss train --data "$W/big" "${T[@]}" --steps 100 --out "$W/rb")
echo "peak resident memory training 100 steps: $small kB from 0.5 MB, $big kB from 24 MB"
[ "$ATTO_ASAN" = 1 ] || { [ "$big" -lt $((small + small / 10 + 2048)) ] && ok ||
  bad "training from a 24 MB corpus took $big kB against $small kB from 0.5 MB: is it loaded?"; }
grep -q '"val_bpb"' "$W/rb/metrics.jsonl" && ok || bad "no bits per byte in the log"
[ "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["type"])' "$W/rb/tokenizer.json")" == bpe ] && ok ||
  bad "the run did not keep the corpus's tokenizer"
expect_ok "$ATTO" sample --model "$W/rb" --prompt "the king" -n 2 --max-tokens 10
# Exact resume from a prepared corpus.
expect_ok "$ATTO" train --data "$W/big" "${T[@]}" --steps 50 --out "$W/half"
expect_ok "$ATTO" train --resume "$W/half" --steps 100 -q
cmp -s "$W/half/model.safetensors" "$W/rb/model.safetensors" && ok || bad "resume from a prepared corpus is not bit-exact"

# Bad inputs: a truncated token file, one with a wrong header, a folder that is no prepared corpus.
cp -r "$W/small" "$W/trunc"
truncate -s -3 "$W/trunc/train.bin"
expect_fail "truncated" "$ATTO" train --data "$W/trunc" "${T[@]}" --steps 1 --out "$W/x1"
cp -r "$W/small" "$W/magic"
printf 'NOTATOKN' | dd of="$W/magic/val.bin" conv=notrunc status=none
expect_fail "no ATTOTOK magic" "$ATTO" train --data "$W/magic" "${T[@]}" --steps 1 --out "$W/x2"
mkdir -p "$W/empty"
expect_fail "is a directory" "$ATTO" train --data "$W/empty" "${T[@]}" --steps 1 --out "$W/x3"
expect_fail "does not exist" "$ATTO" data prepare --tokenizer "$W/tok.json" --input "$W/nope.txt" --out "$W/x5"
finish data_prepare
