#!/usr/bin/env bash
# Crash safety of the run directory: a training run killed with SIGKILL at 20 random moments
# while it saves a checkpoint every step leaves, after each kill, a run directory that loads
# (atto score) and resumes; a save that runs out of disk space fails with an error naming the
# file, exits non-zero, and leaves the previous checkpoint byte for byte. (SIGINT's clean stop
# is test_interrupt.sh.)
# Usage: test_crash.sh PATH/TO/atto
set -u
ATTO=${1:?usage: test_crash.sh path/to/atto}
. "$(dirname "$0")/lib.sh"

write_names 2000 >"$W/names.txt"
# A model whose checkpoint takes a moment to write (~1.2 MB of weights, ~3.6 MB of state), an
# evaluation and a save every step.
M=(--d-model 96 --n-layers 2 --n-heads 4 --block-size 16 --batch-size 8 --eval-every 1 --eval-batches 1 --seed 3 -q)
expect_ok "$ATTO" train --data "$W/names.txt" --out "$W/run" "${M[@]}" --steps 2
RANDOM=7  # the same moments every run
steps=2
for ((i = 1; i <= 20; i++)); do
  "$ATTO" train --resume "$W/run" --steps 1000000 -q >"$W/log.$i" 2>&1 &
  pid=$!
  sleep "0.$((RANDOM % 9 + 1))$((RANDOM % 10))"
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  out=$("$ATTO" score --model "$W/run" maria 2>&1)
  [ $? -eq 0 ] && ok || bad "kill $i: the run does not load: $out"
  # The saved step (train_state's header) never goes back. (The last line of metrics.jsonl may:
  # a kill between a step's metrics line and its save leaves a line that the resume cuts.)
  step=$(head -c 4096 "$W/run/train_state.safetensors" | grep -ao '"step":"[0-9]*"' | grep -o '[0-9][0-9]*')
  [ -n "$step" ] && [ "$step" -ge "$steps" ] && ok || bad "kill $i: the saved step went from $steps to '$step'"
  steps=${step:-$steps}
  # ... and metrics.jsonl holds every step up to it.
  last=$(grep -o '"step": *[0-9]*' "$W/run/metrics.jsonl" | tail -1 | grep -o '[0-9]*$')
  [ -n "$last" ] && [ "$last" -ge "$steps" ] && ok || bad "kill $i: metrics.jsonl ends at step '$last' before the saved step $steps"
done
# After the last kill the run resumes and finishes, and no temporary file is left behind.
out=$("$ATTO" train --resume "$W/run" --steps $((steps + 3)) 2>&1)
[ $? -eq 0 ] && grep -q "^trained $((steps + 3)) steps" <<<"$out" && ok || bad "final resume failed: $out"
left=$(find "$W/run" -name '*.tmp*')
[ -z "$left" ] && ok || bad "temporary files left: $left"

# ---- a full disk during a save ----
# The run directory on a small tmpfs (root, where mounting is allowed) or, failing that, a file
# size limit (ulimit -f: the write fails with EFBIG instead of ENOSPC; SIGXFSZ ignored).
D=$W/disk
mkdir -p "$D"
if [ -z "${ATTO_TEST_NO_MOUNT:-}" ] && mount -t tmpfs -o size=24m tmpfs "$D" 2>/dev/null; then
  trap 'umount "$D" 2>/dev/null; rm -rf "$W"' EXIT
  how=tmpfs
  expect_ok "$ATTO" train --data "$W/names.txt" --out "$D/run" "${M[@]}" --steps 2
  free_kb=$(df -k --output=avail "$D" | tail -1)
  # Leave 256 KB: the next save's temporary files (1.2 MB of weights, 3.6 MB of state) do not fit.
  fallocate -l $(((free_kb - 256) * 1024)) "$D/filler" 2>/dev/null ||
    dd if=/dev/zero of="$D/filler" bs=1024 count=$((free_kb - 256)) 2>/dev/null
  limit=()
else
  how="ulimit -f"
  expect_ok "$ATTO" train --data "$W/names.txt" --out "$D/run" "${M[@]}" --steps 2
  limit=(bash -c 'trap "" XFSZ; ulimit -f 256; exec "$@"' --)  # files of at most 256 KB
fi
# (config.json is rewritten as the resume starts, with the new --steps: it fits.)
before=$(cd "$D/run" && sha256sum model.safetensors train_state.safetensors)
out=$("${limit[@]}" "$ATTO" train --resume "$D/run" --steps 6 -q 2>&1)
rc=$?
[ $rc -ne 0 ] && [ $rc -lt 128 ] && ok || bad "$how: a save on a full disk exited $rc: $out"
grep -qiE "no space|too large|write" <<<"$out" && grep -q "$D/run" <<<"$out" && ok ||
  bad "$how: the error does not say what failed where: $out"
after=$(cd "$D/run" && sha256sum model.safetensors train_state.safetensors)
[ "$before" = "$after" ] && ok || bad "$how: the previous checkpoint changed: $out"
rm -f "$D/filler"
expect_ok "$ATTO" score --model "$D/run" maria
expect_ok "$ATTO" train --resume "$D/run" --steps 4 -q
[ "$how" = tmpfs ] && umount "$D"
echo "full disk simulated with $how"

finish crash
