#!/usr/bin/env bash
# atto serve against hostile clients (docs/serve.md, "Limits"): deep JSON bodies (100,000 levels
# in prompt, stop, messages), huge and malformed bodies and framing, invalid UTF-8, wrong types,
# a flood of 200 requests, clients that leave mid-request and mid-stream, 80 slow sockets (one
# byte a second) and 40 idle ones held for 17 s (past the 15 s request deadline), bad API keys
# (tests/serve/hostile.py, all on 127.0.0.1). Throughout, /health answers within 1 s; at the end
# the same process still serves a normal completion, its resident memory stayed under the bound
# below, and SIGTERM ends it with exit 0. Then the flags that must refuse to start.
ATTO=$1
SRC=$(cd "$(dirname "$0")/../.." && pwd)
source "$SRC/tests/cli/lib.sh"

write_names 300 >"$W/names.txt"
expect_ok "$ATTO" train --data "$W/names.txt" --out "$W/run" --steps 4 --d-model 16 --n-heads 2 --n-layers 1 \
  --threads 1 -q

# VmRSS bound: the model and the server's threads take ~40 MiB here; bodies are parsed 4 at a time
# (at most ~30 MiB each) and incomplete requests are buffered up to 64 MiB in all. AddressSanitizer
# keeps freed memory in quarantine (256 MiB) and shadows the rest.
RSS_BOUND_MIB=400
[ "$ATTO_ASAN" = 1 ] && RSS_BOUND_MIB=1200

KEY=sk-hostile-123
"$ATTO" serve --model "$W/run" --port 0 --api-key "$KEY" --threads 1 >"$W/serve.log" 2>&1 &
PID=$!
URL=""
for _ in $(seq 1 150); do
  URL=$(grep -o 'http://127.0.0.1:[0-9]*' "$W/serve.log" | head -1)
  [ -n "$URL" ] && break
  sleep 0.1
done
if [ -z "$URL" ]; then
  bad "the server did not start: $(cat "$W/serve.log")"
  kill $PID 2>/dev/null
  finish serve_hostile
  exit 1
fi
PORT=${URL##*:}

out=$(timeout 150 python3 "$SRC/tests/serve/hostile.py" "$PORT" "$KEY" "$PID" 17 2>&1)
rc=$?
echo "$out" | grep -v '^RSS_KIB'
if [ $rc -eq 0 ]; then ok; else bad "hostile clients (exit $rc)"; fi
rss=$(sed -n 's/^RSS_KIB //p' <<<"$out")
if [ -n "$rss" ] && [ $((rss / 1024)) -le $RSS_BOUND_MIB ]; then ok; else
  bad "resident memory ${rss:-?} KiB exceeds $RSS_BOUND_MIB MiB"
fi
if kill -0 $PID 2>/dev/null; then ok; else bad "the server (PID $PID) died: $(tail -5 "$W/serve.log")"; fi
kill -TERM $PID
wait $PID
rc=$?
[ $rc -eq 0 ] && ok || bad "SIGTERM: exit $rc: $(tail -5 "$W/serve.log")"

# Flags and key files that must be refused before the server starts (exit non-zero, the flag named).
serve_fails() {  # serve_fails TEXT FLAGS...: refused quickly, naming TEXT
  expect_fail "$1" timeout 20 "$ATTO" serve --model "$W/run" --port 0 "${@:2}"
}
serve_fails "--api-key" --api-key ""
serve_fails "--slots" --slots 1000000
serve_fails "--queue" --queue 1000000000
serve_fails "--queue" --queue -1
serve_fails "--threads" --threads 100000
serve_fails "--body-limit" --body-limit 0
mkdir -p "$W/keydir"
serve_fails "$W/keydir" --api-key-file "$W/keydir"
serve_fails "/dev/zero" --api-key-file /dev/zero
printf '\nkey\n' >"$W/emptyline.key"
serve_fails "the first line is empty" --api-key-file "$W/emptyline.key"
finish serve_hostile
