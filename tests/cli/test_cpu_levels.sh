#!/usr/bin/env bash
# The kernels' instruction-set level (docs/cpu.md): `atto --version` names it; in a portable
# build ATTO_CPU forces each lower level, and at each level training is the same bits for 1 and 2
# threads, learns, and writes a run that the best level loads; a bad ATTO_CPU is a clear error,
# exit 2, before anything runs. In a native build ATTO_CPU is refused (one level only).
# Usage: test_cpu_levels.sh PATH/TO/atto
set -u
ATTO=${1:?usage: test_cpu_levels.sh path/to/atto}
. "$(dirname "$0")/lib.sh"

version=$(env -u ATTO_CPU "$ATTO" --version 2>&1)
grep -qE '^atto [0-9]+\.[0-9]+\.[0-9]+$' <<<"$version" && grep -q '^kernels: ' <<<"$version" && ok ||
  bad "--version does not name the version and the kernels: $version"
best=$(sed -n 's/^kernels: \([a-z0-9]*\).*/\1/p' <<<"$version")

expect_fail "ATTO_CPU='sse9' is not a level" env ATTO_CPU=sse9 "$ATTO" --version
out=$(ATTO_CPU=sse9 "$ATTO" train --help 2>&1 >/dev/null)
[ $? -eq 2 ] && ok || bad "a bad ATTO_CPU does not exit 2: $out"

write_names 300 >"$W/names.txt"
M=(--d-model 32 --n-layers 2 --n-heads 2 --block-size 16 --batch-size 8 --steps 12 --eval-every 6 --seed 5 -q)
if [ "$best" = native ]; then
  expect_fail "-march=native" env ATTO_CPU=avx2 "$ATTO" --version
  finish cpu_levels
  exit
fi

# A portable build: each level the CPU runs, down to avx2.
levels=(avx2 avx512 avx512bf16 amx)
runnable=()
for l in "${levels[@]}"; do
  runnable+=("$l")
  [ "$l" = "$best" ] && break
done
[ "${runnable[-1]}" = "$best" ] && ok || bad "best level '$best' is not one of ${levels[*]}"
for l in "${levels[@]}"; do
  if [[ " ${runnable[*]} " == *" $l "* ]]; then
    v=$(ATTO_CPU=$l "$ATTO" --version 2>&1)
    grep -q "^kernels: $l (.*set by ATTO_CPU" <<<"$v" && ok || bad "ATTO_CPU=$l: --version says $v"
  else
    expect_fail "this CPU cannot run it" env ATTO_CPU=$l "$ATTO" --version
  fi
done
for l in "${runnable[@]}"; do
  case $l in avx512bf16 | amx) continue ;; esac  # the fp32 kernels of these are avx512's
  for t in 1 2; do
    out=$(ATTO_CPU=$l "$ATTO" train --data "$W/names.txt" --out "$W/run-$l-$t" --threads $t "${M[@]}" 2>&1) ||
      bad "ATTO_CPU=$l train --threads $t failed: $out"
  done
  cmp -s "$W/run-$l-1/model.safetensors" "$W/run-$l-2/model.safetensors" && ok ||
    bad "ATTO_CPU=$l: 1 and 2 threads train different weights"
  losses=$(grep -o '"val_loss": *[0-9.]*' "$W/run-$l-1/metrics.jsonl" | grep -o '[0-9.]*$')
  first=$(head -1 <<<"$losses")
  last=$(tail -1 <<<"$losses")
  awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }' && ok ||
    bad "ATTO_CPU=$l: the val loss did not fall ($first -> $last)"
  out=$(env -u ATTO_CPU "$ATTO" score --model "$W/run-$l-1" maria 2>&1) && ok ||
    bad "a run trained at $l does not load at $best: $out"
done
# ATTO_CPU=avx2 turns bf16 off with a message that says so (on a CPU that has bf16).
if [[ " ${runnable[*]} " == *" avx512bf16 "* ]]; then
  expect_fail "ATTO_CPU=avx2 runs no bf16 kernels" env ATTO_CPU=avx2 "$ATTO" train --data "$W/names.txt" \
    --out "$W/bf" --precision bf16 "${M[@]}"
fi
finish cpu_levels
