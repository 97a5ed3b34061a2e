#!/usr/bin/env bash
# atto serve under load, driven by the official OpenAI client (npm's `openai`): 1, 8 and 64
# concurrent clients x 20 streamed completions each against a model of the benchmark's size (c)
# (d_model 128, 4 layers, block 64), on loopback. Every request must succeed; the server's
# resident memory must stay flat from the first few hundred requests to the last; continuous
# batching must put several streams in each decode step (the server's /metrics: decoded rows per
# step) and make many streams (the better of 8 and 64) faster in aggregate than one. Prints the
# table (tokens/s, time to first token, rows a step) that docs/serve.md reports.
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
# The server's decode steps and the rows they fed so far (/metrics), as "steps rows".
decode_counts() {
  python3 -c '
import sys, urllib.request
text = urllib.request.urlopen(sys.argv[1] + "/metrics", timeout=10).read().decode()
v = dict(l.split()[:2] for l in text.splitlines() if l and not l.startswith("#"))
print(v["atto_decode_steps_total"], v["atto_decode_rows_total"])
' "$URL"
}
declare -A rate width
for clients in 1 8 64; do
  read -r steps0 rows0 < <(decode_counts)
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
  read -r steps1 rows1 < <(decode_counts)
  width[$clients]=$(python3 -c "print(round(($rows1 - $rows0) / max(1, $steps1 - $steps0), 2))")
  printf 'streams %2d: %6s tokens/s, time to first token p50 %s ms, p99 %s ms, %s rows a decode step\n' $clients \
    "$tps" "$p50" "$p99" "${width[$clients]}"
done
if [ "$ATTO_ASAN" != 1 ]; then
  read -r first last < <(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))["rss_kb"]
print(next(kb for n, kb in r if n >= 256), r[-1][1])
' "$W/load64.json")
  echo "resident memory: ${first} kB after 256 of the 64 clients' requests, ${last} kB after all"
  [ $((last - first)) -lt 2048 ] && ok || bad "resident memory grew from $first kB to $last kB over the requests"
  # Batching, in the server's own counts: the decode steps of 64 clients fed at least 8 rows on
  # average, those of 8 clients at least 2 (one at a time would be 1; the client keeps at most 8
  # or 64 in flight). Alone on a Zen 5, 5.6-7.3 and 27-55 rows; 2.2 and 27 when another test ran
  # beside it and starved the node client (ctest now runs this test alone: RUN_SERIAL).
  # And what it buys: the better of 8 and 64 streams at least 1.5x one stream's tokens/s. The
  # node client runs on the same 2 cores and bounds the aggregate where one stream is already
  # fast: 1.95-2.0x on an AMD Zen 5 at 6,000-8,300 tokens/s for one stream (8 clients: 16,215),
  # 2.5x where one stream was slower, so the ratio is no test of batching by itself.
  python3 -c "import sys; sys.exit(0 if ${width[8]} >= 2 and ${width[64]} >= 8 else 1)" && ok ||
    bad "8 and 64 streams fed ${width[8]} and ${width[64]} rows a decode step: are requests batched?"
  best=$(python3 -c "print(max(${rate[8]}, ${rate[64]}))")
  python3 -c "import sys; sys.exit(0 if ${best} >= 1.5 * ${rate[1]} else 1)" && ok ||
    bad "8 and 64 streams gave ${rate[8]} and ${rate[64]} tokens/s, not even 1.5x one stream's ${rate[1]}"
fi
kill -TERM $PID
wait $PID
is_zero=$?
[ $is_zero == 0 ] && ok || bad "the server exited with status $is_zero after SIGTERM"
finish serve_load
