#!/usr/bin/env bash
# Ctrl-C during atto train: the CLI's SIGINT handler asks the trainer to stop; the run ends after
# the current step with its state saved and exit status 0, and --resume finishes it.
# Usage: test_interrupt.sh PATH/TO/atto
set -u
ATTO=${1:?usage: test_interrupt.sh path/to/atto}
. "$(dirname "$0")/lib.sh"

write_names >"$W/names.txt"
"$ATTO" train --data "$W/names.txt" --out "$W/run" --d-model 16 --n-layers 1 --n-heads 2 --steps 100000 \
  --log-every 10 --eval-every 1000 >"$W/out.txt" 2>&1 &
PID=$!
for ((i = 0; i < 300; i++)); do  # until it has logged a step (at most 30 s)
  grep -q "^step " "$W/out.txt" 2>/dev/null && break
  sleep 0.1
done
kill -INT "$PID"
wait "$PID"
rc=$?
[ $rc -eq 0 ] && ok || bad "interrupted training exited $rc: $(tail -3 "$W/out.txt")"
line=$(grep "^interrupted at step" "$W/out.txt")
[ -n "$line" ] && ok || bad "no 'interrupted at step' line: $(tail -3 "$W/out.txt")"
grep -q "atto train --resume $W/run" <<<"$line" && ok || bad "the message does not say how to resume: $line"
N=$(sed -E 's/^interrupted at step ([0-9]+):.*/\1/' <<<"$line")
[ "$N" -gt 0 ] && [ "$N" -lt 100000 ] && ok || bad "stopped at step '$N'"
[ -f "$W/run/train_state.safetensors" ] && [ -f "$W/run/model.safetensors" ] && ok || bad "no saved state"

out=$("$ATTO" train --resume "$W/run" --steps $((N + 20)) 2>&1)
[ $? -eq 0 ] && ok || bad "resume failed: $out"
grep -q "resuming $W/run at step $N of $((N + 20))" <<<"$out" && ok || bad "resume did not start at step $N: $out"
grep -q "^trained $((N + 20)) steps" <<<"$out" && ok || bad "resume did not finish: $out"

finish interrupt
