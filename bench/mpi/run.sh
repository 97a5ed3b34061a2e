#!/usr/bin/env bash
# Data-parallel training throughput on one machine: 2 MPI ranks x 1 thread (with and without
# overlapping the gradient exchange with the backward) against 1 process x 2 threads (2 shards),
# on bench/e2e's models (c) and (d) trained on tinyshakespeare; then the gradient-sum times of
# `atto bench comm` (the exact exchange and MPI_Allreduce). One table, one run, one machine.
# Usage: bench/mpi/run.sh [--rounds R] [--atto PATH] [--data FILE]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
ATTO=$ROOT/build/atto
DATA=$ROOT/../shared/data/tinyshakespeare.txt
ROUNDS=2
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) ROUNDS=$2; shift 2 ;;
    --atto) ATTO=$2; shift 2 ;;
    --data) DATA=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -f "$DATA" ] || { echo "no data file $DATA (pass --data FILE)" >&2; exit 2; }
W=$(mktemp -d /tmp/atto-mpi-bench.XXXXXX)
trap 'rm -rf "$W"' EXIT
MPIRUN=(mpirun --allow-run-as-root -np 2 --bind-to core)

declare -A CFG=(
  [c]="--d-model 128 --n-layers 4 --n-heads 4 --block-size 64 --batch-size 12 --steps 400 --log-every 20"
  [d]="--d-model 384 --n-layers 6 --n-heads 6 --block-size 256 --batch-size 8 --steps 40 --log-every 5"
)
# Median tokens/s of a run's logged steps after the first log line (warm-up).
tok_s() {
  python3 - "$1/metrics.jsonl" <<'PY'
import json, statistics, sys
v = [json.loads(l)["tokens_per_s"] for l in open(sys.argv[1]) if "tokens_per_s" in l]
print(f"{statistics.median(v[1:]):.0f}")
PY
}
run_one() {  # run_one MODE CFG -> tokens/s
  local mode=$1 cfg=$2 dir=$W/run
  rm -rf "$dir"
  local common=(train --data "$DATA" --mode stream --tokenizer char --dropout 0 --eval-every 100000 --eval-batches 1
    --seed 1 -q --out "$dir" ${CFG[$cfg]})
  case $mode in
    one) "$ATTO" "${common[@]}" --threads 2 --shards 2 >/dev/null ;;
    mpi) "${MPIRUN[@]}" "$ATTO" "${common[@]}" --shards 1 --overlap on >/dev/null ;;
    mpi_no) "${MPIRUN[@]}" "$ATTO" "${common[@]}" --shards 1 --overlap off >/dev/null ;;
  esac
  tok_s "$dir"
}

echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $("$ATTO" --version); $(mpirun --version | head -1)"
printf '%-4s %22s %26s %28s %8s %8s\n' cfg "1 proc x 2 thr tok/s" "2 ranks, overlap tok/s" "2 ranks, no overlap tok/s" ratio "no-ovl"
for cfg in c d; do
  declare -A best=([one]=0 [mpi]=0 [mpi_no]=0)
  for ((r = 0; r < ROUNDS; r++)); do
    for mode in one mpi mpi_no; do
      t=$(run_one $mode $cfg)
      [ "$t" -gt "${best[$mode]}" ] && best[$mode]=$t
    done
  done
  printf '%-4s %22s %26s %28s %8.2f %8.2f\n' "($cfg)" "${best[one]}" "${best[mpi]}" "${best[mpi_no]}" \
    "$(echo "${best[mpi]} / ${best[one]}" | bc -l)" "$(echo "${best[mpi_no]} / ${best[one]}" | bc -l)"
done
echo
"${MPIRUN[@]}" "$ATTO" bench comm --runs 10
