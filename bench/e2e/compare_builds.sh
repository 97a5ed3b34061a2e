#!/usr/bin/env bash
# Two atto binaries (or one binary at two ATTO_CPU levels) side by side on `atto bench train`
# (a)-(d), old and new alternating in one run, fp32, 2 threads: best tokens/s of ROUNDS each and
# the ratio B / A. The machine's speed swings; read the ratio, not the figures.
#   bench/e2e/compare_builds.sh build/atto build-portable/atto           # native against portable
#   A_ENV="ATTO_CPU=avx512" B_ENV="ATTO_CPU=avx2" bench/e2e/compare_builds.sh build-portable/atto build-portable/atto
# Environment: ROUNDS (3), CONFIGS ("a b c d"), THREADS (2), STEPS (20), A_ENV, B_ENV (extra
# environment for each side, e.g. ATTO_CPU=avx2).
set -euo pipefail
A=${1:?usage: compare_builds.sh ATTO_A ATTO_B}
B=${2:?usage: compare_builds.sh ATTO_A ATTO_B}
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-2}
STEPS=${STEPS:-20}
declare -A CFG=(
  [a]="--d-model 32 --n-layers 4 --n-heads 4 --block-size 16 --batch-size 64"
  [b]="--d-model 64 --n-layers 4 --n-heads 4 --block-size 32 --batch-size 32"
  [c]="--d-model 128 --n-layers 4 --n-heads 4 --block-size 64 --batch-size 12"
  [d]="--d-model 384 --n-layers 6 --n-heads 6 --block-size 256 --batch-size 8"
)
MODEL=(--vocab-size 65 --ffn gelu --norm layernorm --norm-placement pre --pos learned --dropout 0 --tie-weights --bias)
lscpu | sed -n 's/^Model name: *//p' | head -1
echo "A: ${A_ENV:-} $A"
env ${A_ENV:-} "$A" --version | tail -1 | sed 's/^/   /'
echo "B: ${B_ENV:-} $B"
env ${B_ENV:-} "$B" --version | tail -1 | sed 's/^/   /'
tok() {  # tok ENV BINARY CONFIG: tokens/s of one run
  local e=$1 bin=$2 c=$3
  # shellcheck disable=SC2086
  env $e "$bin" bench train ${CFG[$c]} "${MODEL[@]}" --warmup 3 --steps "$STEPS" --threads "$THREADS" --json |
    grep '^{' | tail -1 | python3 -c 'import json,sys; print(round(json.load(sys.stdin)["tokens_per_s"]))'
}
printf '%-6s %12s %12s %8s\n' config "A tok/s" "B tok/s" "B/A"
for c in ${CONFIGS:-a b c d}; do
  best_a=0 best_b=0
  for ((r = 0; r < ROUNDS; r++)); do
    x=$(tok "${A_ENV:-}" "$A" "$c"); ((x > best_a)) && best_a=$x
    y=$(tok "${B_ENV:-}" "$B" "$c"); ((y > best_b)) && best_b=$y
  done
  printf '%-6s %12d %12d %8.3f\n' "($c)" "$best_a" "$best_b" "$(python3 -c "print($best_b / $best_a)")"
done
