# Shared pieces of the CLI test scripts (tests/cli/test_<topic>.sh): source it, after setting
# ATTO. It makes a scratch folder $W (removed on exit), counts checks, and writes the small data
# sets the scripts train on. End a script with `finish <topic>`.
#   ok / bad "why"                 count a check (bad prints the failure)
#   expect_ok cmd...               the command exits 0
#   expect_fail "text" cmd...      the command exits non-zero and its stderr contains text
#   py EXPR FILE                   print the Python expression EXPR of d, FILE's JSON
#   write_names [N] >FILE          N (400) pseudo-names from syllables, deterministic
#   write_toy DIR                  DIR/toy.src and DIR/toy.tgt: the tutorial's 3 sentence pairs
#   write_hf_gpt2 DIR              DIR: the reduced GPT-2 checkpoint in Hugging Face's layout that
#                                  tests/parity/ref_hf_gpt2.py --checkpoint-only writes (needs $SRC;
#                                  $ATTO_PYTHON or /usr/bin/python3); the script exits 1 if it fails
#   $LIMIT_AS                      'ulimit -v 4000000;' (4 GB of address space) for a bash -c line,
#                                  empty when $ATTO is built with AddressSanitizer (its shadow
#                                  memory reserves terabytes of address space at start-up)
W=$(mktemp -d /tmp/atto-cli.XXXXXX)
trap 'rm -rf "$W"' EXIT
LIMIT_AS='ulimit -v 4000000;'
ATTO_ASAN=0
if ldd "$ATTO" 2>/dev/null | grep -q libasan; then LIMIT_AS=''; ATTO_ASAN=1; fi
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
expect_ok() {
  local out
  if ! out=$("$@" 2>&1); then bad "command failed: $*: $out"; return; fi
  ok
}
expect_fail() {
  local want=$1 out rc
  shift
  out=$("$@" 2>&1 >/dev/null)
  rc=$?
  if [ $rc -eq 0 ]; then bad "expected failure: $* (exit 0)"; return; fi
  if ! grep -qF -- "$want" <<<"$out"; then bad "message of '$*' lacks '$want': $out"; return; fi
  ok
}
py() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($1)" "$2"; }
write_names() {
  local s=(ma ri an el jo li sa on ka te) i j n w x=7
  for ((i = 0; i < ${1:-400}; i++)); do
    x=$(((x * 1103515245 + 12345) % 2147483648)); n=$((x % 3 + 1)); w=""
    for ((j = 0; j < n; j++)); do x=$(((x * 1103515245 + 12345) % 2147483648)); w+=${s[$((x % 10))]}; done
    echo "$w"
  done
}
write_toy() {
  printf 'hello my name\nhello messi\nmy name is messi\n' >"$1/toy.src"
  printf 'hola mi nombre\nhola messi\nmi nombre es messi\n' >"$1/toy.tgt"
}
write_hf_gpt2() {
  local out
  if ! out=$("${ATTO_PYTHON:-/usr/bin/python3}" "$SRC/tests/parity/ref_hf_gpt2.py" --case prefix --out "$W/ref.st" \
    --dir "$1" --checkpoint-only 2>&1); then
    echo "FAIL: ref_hf_gpt2.py --checkpoint-only: $out"
    exit 1
  fi
}
finish() {
  echo "$1: $pass passed, $fail failed"
  [ $fail -eq 0 ]
}
