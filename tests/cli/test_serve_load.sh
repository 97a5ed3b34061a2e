#!/usr/bin/env bash
# atto serve under load, driven by the official OpenAI client (npm's `openai`): 1, 8 and 64
# concurrent clients x 20 streamed completions each against a model of the benchmark's size (c)
# (d_model 128, 4 layers, block 64), on loopback. Every request must succeed; the server's
# resident memory must stay flat from the first few hundred requests to the last; continuous
# batching must make many streams (the better of 8 and 64) at least twice as fast in aggregate
# as one. Prints the table (tokens/s, time to first token) that docs/serve.md reports.
ATTO=$1
SRC=$(cd "$(dirname "$0")/../.." && pwd)
source "$SRC/tests/cli/lib.sh"
source "$SRC/tests/serve/client_env.sh"

for i in $(seq 1 400); do printf 'User: hello %d\nAssistant: hi there %d, how are you?\n' $((i % 7)) $((i % 5)); done >"$W/chat.txt"
expect_ok "$ATTO" train --data "$W/chat.txt" --mode stream --block-size 64 --d-model 128 --n-heads 4 --n-layers 4 \
  --out "$W/c" --steps 20 --threads 2 -q

# ATTO_SERVE_MODEL_TYPE=q4_0 (or q8_0): the same load on the model quantized to that type.
MODEL=$W/c
if [ -n "${ATTO_SERVE_MODEL_TYPE:-}" ]; then
  expect_ok "$ATTO" quantize "$W/c" "$W/c.gguf" --type "$ATTO_SERVE_MODEL_TYPE"
  MODEL=$W/c.gguf
fi
"$ATTO" serve --model "$MODEL" --port 0 --slots 64 >"$W/serve.log" 2>&1 &
PID=$!
for _ in $(seq 1 100); do
  URL=$(grep -o 'http://127.0.0.1:[0-9]*' "$W/serve.log" | head -1)
  [ -n "$URL" ] && python3 -c "import urllib.request,sys; urllib.request.urlopen(sys.argv[1], timeout=5)" "$URL/health" 2>/dev/null && break
  sleep 0.1
done
[ -n "$URL" ] || { bad "the server did not start: $(cat "$W/serve.log")"; finish serve_load; exit 1; }

# Under AddressSanitizer everything is several times slower and its quarantine holds freed
# memory: fewer requests there, and no memory or speed figures.
REQ=20
[ "$ATTO_ASAN" = 1 ] && REQ=3
declare -A rate
for clients in 1 8 64; do
  node "$SRC/tests/serve/openai_client.mjs" load --base-url "$URL/v1" --api-key unused --clients $clients \
    --requests $REQ --prompt "User:" --max-tokens 64 --temperature 0.8 --timeout 120 --server-pid $PID \
    --rss-every 256 >"$W/load$clients.json" || bad "load with $clients clients: the client failed"
  read -r okn failed tps p50 p99 < <(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
print(d["ok"], d["failed"], round(d["tokens_per_s"]), round(d["ttft_ms"]["p50"], 1), round(d["ttft_ms"]["p99"], 1))
' "$W/load$clients.json")
  [ "$okn" == $((clients * REQ)) ] && [ "$failed" == 0 ] && ok ||
    bad "$clients clients: $okn ok, $failed failed of $((clients * REQ)): $(head -c 600 "$W/load$clients.json")"
  rate[$clients]=$tps
  printf 'streams %2d: %6s tokens/s, time to first token p50 %s ms, p99 %s ms\n' $clients "$tps" "$p50" "$p99"
done
if [ "$ATTO_ASAN" != 1 ]; then
  read -r first last < <(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))["rss_kb"]
print(next(kb for n, kb in r if n >= 256), r[-1][1])
' "$W/load64.json")
  echo "resident memory: ${first} kB after 256 of the 64 clients' requests, ${last} kB after all"
  [ $((last - first)) -lt 2048 ] && ok || bad "resident memory grew from $first kB to $last kB over the requests"
  # Batching: the better of 8 and 64 streams at least twice one stream's tokens/s. Where one
  # stream is already fast (AMD Zen 5: 7,533 tokens/s against a Xeon's 3,820), 64 clients on
  # the same 2 cores are bound by the client's own work: 14,707 there, 1.95x, while 8 gave 2.5x.
  best=$(python3 -c "print(max(${rate[8]}, ${rate[64]}))")
  python3 -c "import sys; sys.exit(0 if ${best} >= 2 * ${rate[1]} else 1)" && ok ||
    bad "8 and 64 streams gave ${rate[8]} and ${rate[64]} tokens/s, not even twice one stream's ${rate[1]}: are requests batched?"
fi
kill -TERM $PID
wait $PID
is_zero=$?
[ $is_zero == 0 ] && ok || bad "the server exited with status $is_zero after SIGTERM"
finish serve_load
