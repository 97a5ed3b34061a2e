#!/usr/bin/env bash
# mpirun -np 2 atto train on loopback (Open MPI's mpirun, as a user runs it): the same loss
# curve and the same model bytes as one process with the same number of shards, for a GPT
# (dropout, gradient accumulation, with and without overlap, with --recompute) and an
# encoder-decoder; a 2-rank run resumed in one process (with --recompute) continues bit for
# bit; fine-tuning from a trained run (full and LoRA) is bit for bit the same under both; ranks
# that disagree on the data stop with an error; a rank killed or stopped mid-run ends the run with an error within 60 s and leaves
# a run directory that loads and resumes.
# Usage: test_mpi.sh PATH/TO/atto
set -u
ATTO=${1:?usage: test_mpi.sh path/to/atto}
. "$(dirname "$0")/lib.sh"

if ! command -v mpirun >/dev/null; then
  echo "mpirun is missing: scripts/setup installs openmpi-bin"
  exit 1
fi
if ! "$ATTO" train --help | grep -q -- --overlap; then
  echo "$ATTO has no MPI support (configure with libopenmpi-dev installed and -DATTO_MPI=ON)"
  exit 1
fi
# Containers often forbid the cross-process memory copy (CMA) that Open MPI's shared-memory
# transport tries first; copy through the shared segment instead. Leaks inside Open MPI are
# not atto's: LeakSanitizer is off for the ranks of an AddressSanitizer build.
export OMPI_MCA_btl_vader_single_copy_mechanism=none
export ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=0
MPIRUN=(mpirun --allow-run-as-root --oversubscribe -np 2)

write_names 600 >"$W/names.txt"
# The loss curve of a run: metrics.jsonl without its clock fields.
curve() { sed -E 's/"(elapsed_s|tokens_per_s)":[^,}]*,?//g' "$1/metrics.jsonl"; }
same_run() {  # same_run DIR_A DIR_B WHAT: the same curve, weights and training state
  local a=$1 b=$2 what=$3
  [ -s "$a/metrics.jsonl" ] && [ "$(curve "$a")" = "$(curve "$b")" ] && ok || bad "$what: loss curves differ"
  cmp -s "$a/model.safetensors" "$b/model.safetensors" && ok || bad "$what: model.safetensors bytes differ"
  state_eq "$a/train_state.safetensors" "$b/train_state.safetensors" && ok || bad "$what: train_state differs"
}
# Two train_state files hold the same state: tensors byte for byte, metadata but the wall clock.
state_eq() {
  python3 - "$1" "$2" <<'PY'
import json, struct, sys
def load(p):
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    h["__metadata__"].pop("elapsed_seconds")
    return h, b[8 + n:]
sys.exit(0 if load(sys.argv[1]) == load(sys.argv[2]) else 1)
PY
}

# ---- GPT: 2 ranks x 1 shard = 1 process x 2 shards, bit for bit ----
G=(--data "$W/names.txt" --d-model 32 --n-layers 2 --n-heads 2 --log-every 5 --eval-every 10
  --dropout 0.1 --grad-accum 2 --batch-size 8 --warmup 3 --decay-steps 30 --seed 11 -q)
expect_ok "$ATTO" train "${G[@]}" --steps 30 --out "$W/one" --shards 2 --threads 2
out=$("${MPIRUN[@]}" "$ATTO" train "${G[@]}" --steps 30 --out "$W/two" --shards 1 2>&1)
[ $? -eq 0 ] && ok || bad "2-rank training failed: $out"
same_run "$W/one" "$W/two" "gpt, 2 ranks vs 1 process"
[ "$(grep -c '^trained 30 steps' <<<"$out")" = 1 ] && ok || bad "expected one report (rank 0's): $out"
expect_ok "${MPIRUN[@]}" "$ATTO" train "${G[@]}" --steps 30 --out "$W/two_on" --shards 1 --overlap on
same_run "$W/one" "$W/two_on" "gpt, 2 ranks with overlap (on one host auto is off)"
# 2 ranks x 2 shards = 1 process x 4 shards (a bigger model: several gradient buckets in flight),
# the ranks recomputing each block in the backward (the buckets go out as recomputed blocks finish)
B=(--data "$W/names.txt" --d-model 256 --n-layers 2 --n-heads 4 --steps 6 --eval-every 3 --dropout 0.1
  --batch-size 8 --seed 3 -q)
expect_ok "$ATTO" train "${B[@]}" --out "$W/b1" --shards 4 --threads 2
expect_ok "${MPIRUN[@]}" "$ATTO" train "${B[@]}" --out "$W/b2" --shards 2 --overlap on --recompute
same_run "$W/b1" "$W/b2" "gpt d256, 2 ranks x 2 shards with --recompute vs 1 x 4 without"
# 3 ranks x 2 shards = 1 process x 6 shards (segments of uneven size; more ranks than cores)
T=(--data "$W/names.txt" --d-model 32 --n-layers 1 --n-heads 2 --steps 8 --eval-every 4 --dropout 0.1
  --batch-size 12 --seed 9 -q)
expect_ok "$ATTO" train "${T[@]}" --out "$W/t1" --shards 6 --threads 2
expect_ok mpirun --allow-run-as-root --oversubscribe -np 3 "$ATTO" train "${T[@]}" --out "$W/t3" --shards 2 --overlap on
same_run "$W/t1" "$W/t3" "gpt, 3 ranks x 2 shards vs 1 x 6"

# ---- fine-tuning from a trained run, full and LoRA: 2 ranks = 1 process x 2 shards ----
F=(--init-from "$W/one" --data "$W/names.txt" --steps 12 --eval-every 6 --batch-size 8 --seed 5 -q)
for kind in full lora; do
  extra=()
  [ $kind = lora ] && extra=(--lora-rank 4 --lora-targets qkv,fc)
  expect_ok "$ATTO" train "${F[@]}" "${extra[@]}" --out "$W/ft_$kind.1" --shards 2 --threads 2
  expect_ok "${MPIRUN[@]}" "$ATTO" train "${F[@]}" "${extra[@]}" --out "$W/ft_$kind.2" --shards 1
  same_run "$W/ft_$kind.1" "$W/ft_$kind.2" "fine-tuning ($kind), 2 ranks vs 1 process"
done
cmp -s "$W/ft_lora.1/adapter.safetensors" "$W/ft_lora.2/adapter.safetensors" && ok ||
  bad "LoRA under MPI: adapter.safetensors differs from one process's"

# ---- resume: a 2-rank checkpoint continued in one process = one uninterrupted run ----
expect_ok "${MPIRUN[@]}" "$ATTO" train "${G[@]}" --steps 10 --out "$W/half" --shards 1
expect_ok "$ATTO" train --resume "$W/half" --steps 30 --shards 2 --threads 2 --recompute -q
same_run "$W/one" "$W/half" "2-rank checkpoint resumed in 1 process, with --recompute"
# and a 1-process checkpoint continued by 2 ranks
expect_ok "$ATTO" train "${G[@]}" --steps 10 --out "$W/half1" --shards 2 --threads 2
expect_ok "${MPIRUN[@]}" "$ATTO" train --resume "$W/half1" --steps 30 --shards 1 -q
same_run "$W/one" "$W/half1" "1-process checkpoint resumed by 2 ranks"

# ---- seq2seq ----
expect_ok "$ATTO" data synth reverse --n 600 --out "$W/rev"
S=(--task seq2seq --src "$W/rev.src" --tgt "$W/rev.tgt" --d-model 32 --n-enc-layers 1 --n-dec-layers 1 --n-heads 2
  --steps 30 --eval-every 10 --dropout 0.1 --batch-size 8 --seed 5 -q)
expect_ok "$ATTO" train "${S[@]}" --out "$W/s1" --shards 2 --threads 2
expect_ok "${MPIRUN[@]}" "$ATTO" train "${S[@]}" --out "$W/s2" --shards 1
same_run "$W/s1" "$W/s2" "seq2seq, 2 ranks vs 1 process"

# ---- ranks that disagree, and batches too small for the ranks ----
write_names 500 >"$W/other.txt"
cp "$W/names.txt" "$W/data0.txt"
cp "$W/other.txt" "$W/data1.txt"
expect_fail "differs from rank 0" "${MPIRUN[@]}" bash -c \
  "exec \"$ATTO\" train --data \"$W/data\$OMPI_COMM_WORLD_RANK.txt\" --out \"$W/mixed\" --steps 2 -q"
expect_fail "need batches of at least 4 rows" "${MPIRUN[@]}" "$ATTO" train --data "$W/names.txt" --out "$W/small" \
  --batch-size 3 --shards 2 --steps 2 -q

# ---- a rank that dies or hangs mid-run ----
# kill_rank SIGNAL DIR EXTRA...: starts a long 2-rank run, waits for its first checkpoint, sends
# SIGNAL to rank 1, and checks that mpirun ends non-zero within 60 s with a message and that
# the run directory loads and resumes.
kill_rank() {
  local sig=$1 dir=$2 want=$3
  shift 3
  "${MPIRUN[@]}" "$ATTO" train --data "$W/names.txt" --out "$dir" --d-model 32 --n-layers 1 --n-heads 2 \
    --steps 1000000 --eval-every 20 --log-every 20 "$@" >"$dir.log" 2>&1 &
  local pid=$! i rank1=""
  for ((i = 0; i < 600; i++)); do
    [ -f "$dir/train_state.safetensors" ] && break
    sleep 0.1
  done
  sleep 0.5
  for p in $(pgrep -f "$ATTO train --data $W/names.txt --out $dir"); do
    grep -qz '^OMPI_COMM_WORLD_RANK=1$' "/proc/$p/environ" 2>/dev/null && rank1=$p
  done
  [ -n "$rank1" ] && ok || { bad "no rank 1 process for $dir"; kill -9 "$pid"; return; }
  local t0=$SECONDS
  kill "-$sig" "$rank1"
  for ((i = 0; i < 700; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    bad "$sig to rank 1: the run still runs after 70 s"
    pkill -9 -f "$ATTO train --data $W/names.txt --out $dir"
  fi
  wait "$pid"
  local rc=$?
  [ $rc -ne 0 ] && [ $((SECONDS - t0)) -le 60 ] && ok || bad "$sig to rank 1: exit $rc after $((SECONDS - t0)) s"
  grep -q "$want" "$dir.log" && ok || bad "$sig to rank 1: no '$want' in: $(tail -5 "$dir.log")"
  pkill -9 -f "$ATTO train --data $W/names.txt --out $dir" 2>/dev/null
  expect_ok "$ATTO" score --model "$dir" maria
  local step
  step=$(grep -o '"step": *[0-9]*' "$dir/metrics.jsonl" | tail -1 | grep -o '[0-9]*$')
  expect_ok "$ATTO" train --resume "$dir" --steps $((step + 25)) -q
}
# ---- Ctrl-C on mpirun: it sends the ranks SIGTERM; they stop at the end of the step and save ----
"${MPIRUN[@]}" "$ATTO" train --data "$W/names.txt" --out "$W/int" --d-model 32 --n-layers 1 --n-heads 2 \
  --steps 1000000 --eval-every 20 --log-every 20 >"$W/int.log" 2>&1 &
MPID=$!
for ((i = 0; i < 600; i++)); do
  [ -f "$W/int/train_state.safetensors" ] && break
  sleep 0.1
done
kill -INT "$MPID"
wait "$MPID"
grep -q "^interrupted at step" "$W/int.log" && ok || bad "Ctrl-C on mpirun: no 'interrupted at step': $(tail -5 "$W/int.log")"
expect_ok "$ATTO" score --model "$W/int" maria
kill_rank KILL "$W/killed" "exited on signal 9"
kill_rank STOP "$W/stopped" "no answer from the other ranks" --dist-timeout 3

finish mpi
