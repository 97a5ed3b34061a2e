#!/usr/bin/env bash
# A census of bad inputs, one table: every case runs one atto command on something broken and
# asserts that it exits with an error status (not a signal, not a timeout: 60 s, at most 4 GB of
# address space outside AddressSanitizer builds), prints an error line naming the input (the
# expected text), and changes no existing file (checksums of every fixture before and after).
# The table is printed at the end (docs/robustness.md keeps a copy).
# Usage: test_census.sh PATH/TO/atto
set -u
ATTO=$(readlink -f "${1:?usage: test_census.sh path/to/atto}")
. "$(dirname "$0")/lib.sh"
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
F=$W/fixtures
mkdir -p "$F"

# ---- fixtures ----------------------------------------------------------------------------------
write_names >"$F/names.txt"
write_toy "$F"
SMALL=(--n-layers 1 --d-model 16 --n-heads 2 --batch-size 8 --steps 4 --eval-every 2 -q)
expect_ok "$ATTO" train --data "$F/names.txt" --out "$F/run" "${SMALL[@]}"
expect_ok "$ATTO" train --task seq2seq --src "$F/toy.src" --tgt "$F/toy.tgt" --tokenizer word --d-model 12 \
  --n-heads 3 --n-enc-layers 1 --n-dec-layers 1 --d-ff 12 --steps 4 --eval-bleu 0 --out "$F/s2s" -q
expect_ok "$ATTO" export --model "$F/run" --out "$F/run.gguf"
variant() { rm -rf "$F/$1" && cp -r "$F/run" "$F/$1"; }  # variant NAME: a copy of the run to break
edit_config() {                                           # edit_config RUN PYTHON-STATEMENT (on c)
  python3 - "$1/config.json" "$2" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
exec(sys.argv[2])
json.dump(c, open(sys.argv[1], "w"), indent=2)
EOF
}
variant future && edit_config "$F/future" 'c["format_version"] = 99'
variant disagree && edit_config "$F/disagree" 'c["model"]["d_model"] = 32'
variant nan && python3 - "$F/nan/model.safetensors" <<'EOF'
import json, struct, sys
with open(sys.argv[1], "r+b") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    h = json.loads(f.read(n))
    name = sorted(k for k in h if k != "__metadata__")[0]
    b, e = h[name]["data_offsets"]
    f.seek(8 + n + b)
    f.write(struct.pack("<f", float("nan")) * ((e - b) // 4))
EOF
variant trunc && truncate -s 100 "$F/trunc/model.safetensors"
variant state && truncate -s 64 "$F/state/train_state.safetensors"
variant badcfg && printf '{"model": {' >"$F/badcfg/config.json"
variant badtok && printf '{"type": "char", "chars": 7}' >"$F/badtok/tokenizer.json"
variant notok && rm "$F/notok/tokenizer.json"
variant vocab && python3 - "$F/vocab/tokenizer.json" <<'EOF'
import json, sys
t = json.load(open(sys.argv[1]))
t["chars"] = t["chars"][:3]
json.dump(t, open(sys.argv[1], "w"))
EOF
# A read-only run directory: root ignores permissions, so there the case runs as the user nobody
# (setpriv); any other user meets the read-only files as they are.
variant ro && chmod -R a-w "$F/ro"
AS_OTHER=()
if [ "$(id -u)" -eq 0 ]; then
  chmod o+rx "$W" "$F"
  AS_OTHER=(setpriv --reuid=65534 --regid=65534 --clear-groups)
fi
head -c 3000 /dev/urandom >"$F/binary.bin"
printf 'caf\xe9\nna\xefve\n' >"$F/latin1.txt"
: >"$F/empty.txt"
mkdir -p "$F/adir"
head -c 5000 "$F/run.gguf" >"$F/trunc.gguf"
printf '{"block_size": "big"}' >"$F/badconfig.json"
printf '{"no_such_key": 1}' >"$F/unknown.json"
printf 'no tab here\n' >"$F/notab.tsv"
printf 'a\nb\n' >"$F/two.src"
printf 'a\n' >"$F/one.tgt"
NOWRITE=/proc/atto-cannot-write-here

# ---- the cases ---------------------------------------------------------------------------------
sums() { find "$F" -type f -print0 | sort -z | xargs -0 sha256sum; }
TABLE=""
n=0
# census NAME WANT CMD...: the command fails cleanly, naming WANT, and changes no fixture.
census() {
  local name=$1 want=$2 out rc before after t0=$SECONDS verdict="ok"
  shift 2
  n=$((n + 1))
  before=$(sums)
  out=$(cd "$W" && bash -c "$LIMIT_AS exec timeout 60 \"\$@\"" -- "$@" 2>&1 >/dev/null </dev/null)
  rc=$?
  after=$(sums)
  if [ $rc -eq 0 ]; then
    verdict="exit 0"
  elif [ $rc -ge 124 ]; then
    verdict="exit $rc (timeout or signal)"
  elif ! grep -q "error" <<<"$out"; then
    verdict="no error line"
  elif ! grep -qF -- "$want" <<<"$out"; then
    verdict="the error does not name '$want'"
  elif [ "$before" != "$after" ]; then
    verdict="a fixture changed"
  fi
  if [ "$verdict" = ok ]; then ok; else bad "census $name: $verdict: $(head -c 400 <<<"$out")"; fi
  TABLE+="| $n | $name | \`$want\` | exit $rc, $((SECONDS - t0)) s, $verdict |"$'\n'
}

R=$F/run
# The cases, in parts (tests/cli/census/*.sh, sourced in name order): each part adds cases of one
# kind with census NAME WANT CMD...; a part may make fixtures of its own under $F first.
for part in "$(dirname "$(readlink -f "$0")")"/census/*.sh; do
  . "$part"
done

echo "| # | case | the error names | result |"
echo "|---|---|---|---|"
printf '%s' "$TABLE"
[ "$n" -ge 120 ] && ok || bad "only $n census cases"
chmod -R u+w "$F/ro"  # so that the scratch folder can be removed by any user
finish census
