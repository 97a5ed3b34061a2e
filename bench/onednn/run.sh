#!/usr/bin/env bash
# atto's bf16 GEMM against oneDNN's bf16 matmul (bench/onednn/matmul_bf16.cpp) and the bf16 units'
# ceiling, in one run: `atto bench gemm --precision bf16 --shape M,N,K` and oneDNN alternating shape
# by shape, best call of each over ROUNDS rounds. Both 2 threads (oneDNN: OMP_NUM_THREADS=2).
# The ceiling is `atto bench gemm`'s: vdpbf16ps (or AMX's tdpbf16ps) on registers, every thread at
# once. atto is timed twice: packing B on every call (`bf16 gemm`) and with B packed once before
# the timed calls (`bf16 cached`: a linear layer's weight cache, as in training and generation;
# oneDNN's B is likewise reordered once), A rounded to bf16 on each call in both. Needs Debian's libdnnl-dev (a benchmark-only dependency: apt-get install libdnnl-dev).
#   bench/onednn/run.sh build/atto
# Environment: SHAPES ("1024,1024,1024 4096,768,3072 4096,50257,768": a square, GPT-2's mlp.c_proj
# and its head at 4 x 1024 tokens), ROUNDS (2), STEPS (timed calls a round, 5), PYTHON.
set -euo pipefail
ATTO=${1:?usage: bench/onednn/run.sh path/to/atto}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
PY=${PYTHON:-/usr/bin/python3}
[ -f /usr/include/dnnl.hpp ] || { echo "bench/onednn: needs oneDNN's headers: apt-get install libdnnl-dev" >&2; exit 1; }
BIN=$(mktemp -d)/matmul_bf16
trap 'rm -rf "$(dirname "$BIN")"' EXIT
g++ -O2 -std=c++17 "$SRC/bench/onednn/matmul_bf16.cpp" -ldnnl -o "$BIN"
field() { "$PY" -c "import json,sys; j=json.loads(sys.stdin.read().strip().splitlines()[-1]); print(eval('j' + sys.argv[1]))" "$1"; }
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores"
"$ATTO" --version | sed 's/^/  /'
ceiling=$("$ATTO" bench gemm --precision bf16 --size 64 --warmup 0 --steps 1 --fma-seconds 1 --threads 2 --json |
          field "['bf16']['peak_gflops']")
printf 'bf16 units ceiling (2 threads): %.0f GFLOP/s\n\n' "$ceiling"
printf '| M, N, K | atto bf16 GFLOP/s (B packed each call / once) | oneDNN bf16 GFLOP/s (%s) | atto / oneDNN | atto / ceiling | oneDNN / ceiling |\n' impl
printf '|---|---|---|---|---|---|\n'
for shape in ${SHAPES:-1024,1024,1024 4096,768,3072 4096,50257,768}; do
  a=0 c=0 o=0 impl=""
  for _ in $(seq "${ROUNDS:-2}"); do
    j=$("$ATTO" bench gemm --precision bf16 --shape "$shape" --warmup 1 --steps "${STEPS:-5}" --fma-seconds 0 --threads 2 --json)
    a=$("$PY" -c "print(max($a, $(field "['bf16']['best_gflops']" <<<"$j")))")
    c=$("$PY" -c "print(max($c, $(field "['bf16']['cached_best_gflops']" <<<"$j")))")
    j=$(OMP_NUM_THREADS=2 "$BIN" ${shape//,/ } "${STEPS:-5}")
    o=$("$PY" -c "print(max($o, $(field "['best_gflops']" <<<"$j")))")
    impl=$(field "['impl']" <<<"$j")
  done
  "$PY" -c "print(f'| $shape | {$a:.0f} / {$c:.0f} | {$o:.0f} ($impl) | {$a / $o:.2f}x / {$c / $o:.2f}x | {100 * $a / $ceiling:.0f}% / {100 * $c / $ceiling:.0f}% | {100 * $o / $ceiling:.0f}% |')"
done
