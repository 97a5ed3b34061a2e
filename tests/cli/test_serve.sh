#!/usr/bin/env bash
# atto serve driven by the official OpenAI client (npm's `openai`, installed into the build tree by
# tests/serve/install.sh): completions equal to `atto sample`, streaming equal to non-streaming,
# chat, n > 1, stop strings, logprobs; bad requests get the right 4xx JSON error and the server
# keeps answering; SIGTERM ends it with exit 0.
ATTO=$1
SRC=$(cd "$(dirname "$0")/../.." && pwd)
source "$SRC/tests/cli/lib.sh"
source "$SRC/tests/serve/client_env.sh"

write_names 600 >"$W/names.txt"
expect_ok "$ATTO" train --data "$W/names.txt" --out "$W/run" --steps 150 --d-model 32 --n-heads 2 --n-layers 2 \
  --threads 1 --lr 0.01 -q
# A stream model on chat-formatted text, for /v1/chat/completions. The checks compare the server
# with atto sample, so the model need not be good: 40 steps.
for i in $(seq 1 300); do printf 'User: hello %d\nAssistant: hi there %d\n' $((i % 7)) $((i % 5)); done >"$W/chat.txt"
expect_ok "$ATTO" train --data "$W/chat.txt" --mode stream --block-size 64 --out "$W/chat" --steps 40 \
  --d-model 32 --n-heads 2 --n-layers 2 --threads 1 --lr 0.01 -q

# ATTO_SERVE_MODEL_TYPE=q4_0 (or q8_0): every check below on the two models quantized to that type
# (GGUF files the server computes on with the integer kernels): cli.serve_q4_0.
RUN=$W/run CHAT=$W/chat
if [ -n "${ATTO_SERVE_MODEL_TYPE:-}" ]; then
  expect_ok "$ATTO" quantize "$W/run" "$W/run.gguf" --type "$ATTO_SERVE_MODEL_TYPE"
  expect_ok "$ATTO" quantize "$W/chat" "$W/chat.gguf" --type "$ATTO_SERVE_MODEL_TYPE"
  RUN=$W/run.gguf CHAT=$W/chat.gguf
fi

KEY=sk-test-123
http_get() {  # http_get URL [KEY]: the body of a 200 answer (exit 1 otherwise); no curl needed
  python3 -c '
import sys, urllib.request
req = urllib.request.Request(sys.argv[1])
if len(sys.argv) > 2:
    req.add_header("Authorization", "Bearer " + sys.argv[2])
try:
    sys.stdout.write(urllib.request.urlopen(req, timeout=5).read().decode())
except Exception:
    sys.exit(1)
' "$@"
}
start_server() {  # start_server RUN LOGFILE [FLAGS...]: sets PID and URL
  "$ATTO" serve --model "$1" --port 0 --api-key "$KEY" --threads 1 --body-limit 1000000 "${@:3}" >"$2" 2>&1 &
  PID=$!
  for _ in $(seq 1 100); do
    URL=$(grep -o 'http://127.0.0.1:[0-9]*' "$2" | head -1)
    [ -n "$URL" ] && http_get "$URL/health" >/dev/null && return 0
    sleep 0.1
  done
  bad "the server did not start: $(cat "$2")"
  return 1
}
C() { node "$SRC/tests/serve/openai_client.mjs" "$1" --base-url "$URL/v1" --api-key "$KEY" "${@:2}"; }
jq_py() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
is() {  # is <what> <got> <want>
  [ -n "${VERBOSE:-}" ] && echo "  $1: $2"
  if [ "$2" == "$3" ]; then ok; else bad "$1: got '$2', want '$3'"; fi
}

start_server "$RUN" "$W/serve.log" || { finish serve; exit 1; }
# Completions equal atto sample (text after the prompt), n = 3, same seed.
# (An empty prompt: the names model's samples after a complete syllable are often empty.)
sample=$("$ATTO" sample --model "$RUN" --prompt "" -n 3 --seed 11 --max-tokens 12 --temperature 0.9)
[ "$(printf '%s' "$sample" | tr -d '\n' | wc -c)" -ge 6 ] && ok || bad "atto sample gave (almost) nothing: '$sample'"
got=$(C complete --prompt "" --n 3 --seed 11 --max-tokens 12 --temperature 0.9 | jq_py '"\n".join(c["text"] for c in d["choices"])')
is "completions = atto sample" "$got" "$sample"
# Streaming reassembles to the same texts.
streamed=$(C stream --prompt "" --n 3 --seed 11 --max-tokens 12 --temperature 0.9 | jq_py '"\n".join(d["text"])')
is "streamed = non-streamed" "$streamed" "$sample"
# Finish reasons, usage, stop strings, logprobs.
C complete --prompt ma --seed 3 --max-tokens 2 >"$W/len.json"
is "finish_reason length" "$(jq_py 'd["choices"][0]["finish_reason"]' <"$W/len.json")" length
is "usage completion_tokens" "$(jq_py 'd["usage"]["completion_tokens"]' <"$W/len.json")" 2
full=$(C complete --prompt "" --seed 5 --max-tokens 12 | jq_py 'd["choices"][0]["text"]')
stop=${full:2:1}
[ -n "$stop" ] && ok || bad "the sample '$full' is too short for a stop-string test"
cut=$(C complete --prompt "" --seed 5 --max-tokens 12 --stop "$stop" | jq_py 'd["choices"][0]["text"]+"|"+d["choices"][0]["finish_reason"]')
is "stop string" "$cut" "${full%%"$stop"*}|stop"
C complete --prompt "" --seed 5 --max-tokens 6 --logprobs 3 >"$W/lp.json"
lp_ok=$(jq_py 'all(len(t)==3 for t in d["choices"][0]["logprobs"]["top_logprobs"]) and "".join(d["choices"][0]["logprobs"]["tokens"])==d["choices"][0]["text"] and all(v<=0 for v in d["choices"][0]["logprobs"]["token_logprobs"])' <"$W/lp.json")
is "logprobs: 3 alternatives per token, tokens spell the text" "$lp_ok" True
is "models" "$(C models | jq_py 'd["data"][0]["id"]')" run
# A prompt given as token ids (OpenAI's list form): the ids of a text give that text's choices,
# logprobs and echo (ids outside the vocabulary: below).
ids=$(printf 'ma' | "$ATTO" tokenize --model "$RUN" --json | jq_py 'json.dumps(d["ids"])')
by_text=$(C complete --prompt ma --n 2 --seed 4 --max-tokens 8 --logprobs 2 --echo | jq_py 'json.dumps(d["choices"])')
by_ids=$(C complete --prompts "$ids" --n 2 --seed 4 --max-tokens 8 --logprobs 2 --echo | jq_py 'json.dumps(d["choices"])')
[[ "$by_text" == *'"text": "ma'* ]] && ok || bad "the text prompt's choices lack the echoed prompt: '$by_text'"
is "token-id prompt = its text" "$by_ids" "$by_text"
is "two token-id prompts" "$(C complete --prompts "[$ids, $ids]" --seed 4 --max-tokens 8 | jq_py 'len(d["choices"])')" 2
# OpenAI's logit_bias, frequency_penalty and presence_penalty: the choices of `atto sample` with
# the same flags; +100 forces a token, -100 keeps it out.
z=$(printf k | "$ATTO" tokenize --model "$RUN" --json | jq_py 'd["ids"][0]')
is "logit_bias +100" "$(C complete --prompt ma --seed 3 --max-tokens 5 --extra "{\"logit_bias\":{\"$z\":100}}" | jq_py 'd["choices"][0]["text"]')" kkkkk
plain=$(C complete --prompt "" --n 4 --seed 8 --max-tokens 12 | jq_py '"".join(c["text"] for c in d["choices"])')
ch=${plain:0:1}
cid=$(printf '%s' "$ch" | "$ATTO" tokenize --model "$RUN" --json | jq_py 'd["ids"][0]')
banned=$(C complete --prompt "" --n 4 --seed 8 --max-tokens 12 --extra "{\"logit_bias\":{\"$cid\":-100}}" | jq_py '"\n".join(c["text"] for c in d["choices"])')
[[ -n "$ch" && "$banned" != *"$ch"* ]] && ok || bad "logit_bias -100 on '$ch' (id $cid): '$banned'"
is "logit_bias = atto sample --logit-bias" "$banned" "$("$ATTO" sample --model "$RUN" --prompt "" -n 4 --seed 8 --max-tokens 12 --logit-bias "$cid=-100")"
pen='{"frequency_penalty":1.5,"presence_penalty":-0.5}'
is "penalties = atto sample" "$(C complete --prompt "" --n 4 --seed 8 --max-tokens 12 --extra "$pen" | jq_py '"\n".join(c["text"] for c in d["choices"])')" \
  "$("$ATTO" sample --model "$RUN" --prompt "" -n 4 --seed 8 --max-tokens 12 --frequency-penalty 1.5 --presence-penalty -0.5)"

# Bad requests: each a 4xx JSON error, and the server still answers.
err() { jq_py 'str(d["error"]["status"])+" "+str(d["error"].get("param"))'; }
is "unknown model" "$(C complete --prompt ma --model nope | err)" "404 model"
is "negative max_tokens" "$(C complete --prompt ma --max-tokens -1 | err)" "400 max_tokens"
is "huge max_tokens" "$(C complete --prompt ma --max-tokens 100000000 | err)" "400 max_tokens"
is "top_p 5" "$(C complete --prompt ma --top-p 5 | err)" "400 top_p"
is "wrong type" "$(C complete --prompt ma --extra '{"max_tokens":"ten"}' | err)" "400 max_tokens"
is "prompt not a string" "$(C complete --prompt ma --extra '{"prompt":5}' | err)" "400 prompt"
long=$(printf 'ma%.0s' $(seq 1 50))
is "prompt longer than the context" "$(C complete --prompt "$long" | err)" "400 prompt"
is "unknown character" "$(C complete --prompt 'ma<>' | err)" "400 prompt"
is "token id past the vocabulary" "$(C complete --prompts '[1, 100000]' | err)" "400 prompt"
is "logit_bias past the vocabulary" "$(C complete --prompt ma --extra '{"logit_bias":{"100000":5}}' | err)" "400 logit_bias"
is "logit_bias key not an id" "$(C complete --prompt ma --extra '{"logit_bias":{"-3":5}}' | err)" "400 logit_bias"
is "logit_bias of 1000" "$(C complete --prompt ma --extra '{"logit_bias":{"3":1000}}' | err)" "400 logit_bias"
is "frequency_penalty 3" "$(C complete --prompt ma --extra '{"frequency_penalty":3}' | err)" "400 frequency_penalty"
# What the server cannot do is refused by name, not dropped; the neutral values pass.
is "suffix" "$(C complete --prompt ma --extra '{"suffix":"ia"}' | err)" "400 suffix"
is "best_of 3" "$(C complete --prompt ma --extra '{"best_of":3}' | err)" "400 best_of"
is "best_of n and an empty suffix" "$(C complete --prompt "" --n 3 --seed 11 --max-tokens 12 --temperature 0.9 --extra '{"best_of":3,"suffix":""}' | jq_py '"\n".join(c["text"] for c in d["choices"])')" "$sample"
raw() { C raw "$@" | jq_py 'str(d["status"])+" "+(d["body"]["error"]["type"] if isinstance(d["body"],dict) and "error" in d["body"] else "-")'; }
is "GET on a POST route" "$(raw --path /v1/completions --method GET)" "405 invalid_request_error"
is "unknown route" "$(raw --path /v1/nothing --method GET)" "404 invalid_request_error"
is "malformed JSON" "$(raw --path /v1/completions --body '{"prompt": ')" "400 invalid_request_error"
is "temperature NaN" "$(raw --path /v1/completions --body '{"prompt":"ma","temperature":NaN}')" "400 invalid_request_error"
is "no API key" "$(node "$SRC/tests/serve/openai_client.mjs" complete --base-url "$URL/v1" --no-auth --prompt ma --model run | err)" "401 None"
is "wrong API key" "$(node "$SRC/tests/serve/openai_client.mjs" complete --base-url "$URL/v1" --api-key nope --prompt ma --model run | err)" "401 None"
# llama.cpp server's /tokenize and /detokenize: atto tokenize's ids, and back.
want_ids=$(printf 'mari' | "$ATTO" tokenize --model "$RUN" --json | jq_py 'json.dumps(d["ids"])')
body() { C raw --path "$1" --body "$2" | jq_py "$3"; }
is "/tokenize" "$(body /tokenize '{"content":"mari"}' 'json.dumps(d["body"]["tokens"])')" "$want_ids"
is "/tokenize with_pieces" "$(body /tokenize '{"content":"mari","with_pieces":true}' '"".join(t["piece"] for t in d["body"]["tokens"])')" mari
is "/tokenize add_special" "$(body /tokenize '{"content":"ma","add_special":true}' 'len(d["body"]["tokens"])')" 3
is "/detokenize" "$(body /detokenize "{\"tokens\":$want_ids}" 'd["body"]["content"]')" mari
is "/tokenize unknown character" "$(body /tokenize '{"content":"m<>"}' 'str(d["status"])+" "+d["body"]["error"]["param"]')" "400 content"
is "/detokenize past the vocabulary" "$(body /detokenize '{"tokens":[1,100000]}' 'str(d["status"])+" "+d["body"]["error"]["param"]')" "400 tokens"
is "GET /tokenize" "$(raw --path /tokenize --method GET)" "405 invalid_request_error"
big=$(C raw --path /v1/completions --body-bytes 100000000 | jq_py 'str(d["status"])')
is "100 MB body" "$big" 413
is "still serving" "$(C complete --prompt "" --n 3 --seed 11 --max-tokens 12 --temperature 0.9 | jq_py '"\n".join(c["text"] for c in d["choices"])')" "$sample"
http_get "$URL/metrics" "$KEY" | grep -q '^atto_generated_tokens_total [1-9]' && ok || bad "/metrics"
kill -TERM $PID
wait $PID
is "SIGTERM exit status" $? 0

# Chat on the chat-formatted model.
start_server "$CHAT" "$W/serve_chat.log" || { finish serve; exit 1; }
msgs='[{"role":"user","content":"hello 3"}]'
reply=$(C chat --messages "$msgs" --seed 2 --max-tokens 20 --temperature 0 | jq_py 'd["choices"][0]["message"]["role"]+": "+d["choices"][0]["message"]["content"]')
prompt=$(printf 'User: hello 3\nAssistant:')
want=$("$ATTO" sample --model "$CHAT" --prompt "$prompt" -n 1 --greedy --max-tokens 20 --seed 2 | head -c -1 | tail -c +$((${#prompt} + 1)) | sed '/^----------$/d')
is "chat = atto sample on the template" "$reply" "assistant: $want"
chat_stream=$(C chat --messages "$msgs" --stream --seed 2 --max-tokens 20 --temperature 0 | jq_py 'd["text"][0]')
is "chat stream" "assistant: $chat_stream" "assistant: $want"
# Content as a list of text parts (the openai client's typed form): the same template, the same reply;
# parts a text model cannot read are refused by name.
parts='[{"role":"user","content":[{"type":"text","text":"hello 3"}]}]'
is "chat with text parts" "$(C chat --messages "$parts" --seed 2 --max-tokens 20 --temperature 0 | jq_py 'd["choices"][0]["message"]["content"]')" "$want"
img='{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"http://x/y.png"}}]}]}'
is "chat with an image part" "$(C raw --path /v1/chat/completions --body "$img" | jq_py 'str(d["status"])+" "+str("image_url" in d["body"]["error"]["message"])')" "400 True"

# Tools and JSON mode are refused by name (the chat model answers in plain text); neutral values pass.
is "chat with tools" "$(C chat --messages "$msgs" --extra '{"tools":[{"type":"function","function":{"name":"f"}}]}' | err)" "400 tools"
is "chat with tool_choice required" "$(C chat --messages "$msgs" --extra '{"tool_choice":"required"}' | err)" "400 tool_choice"
is "chat in JSON mode" "$(C chat --messages "$msgs" --extra '{"response_format":{"type":"json_object"}}' | err)" "400 response_format"
neutral='{"tools":[],"tool_choice":"none","response_format":{"type":"text"},"user":"u"}'
is "chat with neutral values" "$(C chat --messages "$msgs" --seed 2 --max-tokens 20 --temperature 0 --extra "$neutral" | jq_py 'd["choices"][0]["message"]["content"]')" "$want"

# Continuous batching: requests sent at once (prompts of different lengths, n, seeds, samplers;
# long enough that they overlap and re-encode past the block of 64) share the decode batch, and
# each gets exactly what `atto sample` gives it alone. One at a time, the mean decode width
# (rows per step) would be 2 (their n weighted by their tokens); together it is near 16.
metric() { http_get "$URL/metrics" "$KEY" | awk -v m="$1" '$1 == m {print $2}'; }
steps0=$(metric atto_decode_steps_total)
rows0=$(metric atto_decode_rows_total)
cat >"$W/many.json" <<'JSON'
[{"prompt": "User: hello 1\n", "max_tokens": 1390, "seed": 1, "temperature": 0.9},
 {"prompt": "User:", "max_tokens": 1370, "seed": 2, "n": 3, "temperature": 1.0},
 {"prompt": "Assistant: hi there 4\nUser: hel", "max_tokens": 1400, "seed": 3, "temperature": 0.7, "top_k": 5},
 {"prompt": "U", "max_tokens": 1240, "seed": 4, "n": 2},
 {"prompt": "User: hello 2\nAssistant:", "max_tokens": 1420, "seed": 5, "temperature": 1.1, "repeat_penalty": 1.2},
 {"prompt": "hi", "max_tokens": 1450, "seed": 6, "n": 4, "top_p": 0.9},
 {"prompt": "User: hello 6\nAssistant: hi there 1\nUser: hello 0\nAssistant:", "max_tokens": 1260, "seed": 7},
 {"prompt": "A", "max_tokens": 1410, "seed": 8, "n": 2, "temperature": 0.8, "min_p": 0.05}]
JSON
# Each of the requests sent at once (many.json) = atto sample with its settings: compare_many OUT
# [PRECISION] prints one line per request, "same" or what differs.
compare_many() {
  python3 - "$W/many.json" "$1" "$ATTO" "$CHAT" "${2:-fp32}" <<'PY'
import json, subprocess, sys
reqs, got = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
flags = {"max_tokens": "--max-tokens", "seed": "--seed", "n": "-n", "temperature": "--temperature", "top_k": "--top-k",
         "top_p": "--top-p", "min_p": "--min-p", "repeat_penalty": "--repetition-penalty"}
for i, (q, g) in enumerate(zip(reqs, got)):
    cmd = [sys.argv[3], "sample", "--model", sys.argv[4], "--prompt", q["prompt"], "--json", "--precision", sys.argv[5]]
    for k, v in q.items():
        if k in flags: cmd += [flags[k], str(v)]
    if "n" not in q: cmd += ["-n", "1"]
    want = [s["text"][len(q["prompt"]):] for s in json.loads(subprocess.check_output(cmd))["samples"]]
    print(f"request {i}: {'same' if want == g['text'] else 'DIFFERENT: got %r want %r' % (g['text'], want)}")
PY
}
C many --requests "$(cat "$W/many.json")" >"$W/many.out"
compare_many "$W/many.out" >"$W/many.cmp"
is "concurrent requests = atto sample, each" "$(grep -c ': same$' "$W/many.cmp")" 8
grep DIFFERENT "$W/many.cmp" | head -3
width=$(python3 -c "print(($(metric atto_decode_rows_total) - $rows0) / max(1, $(metric atto_decode_steps_total) - $steps0))")
echo "mean decode width $width"; python3 -c "import sys; sys.exit(0 if $width >= 5 else 1)" && ok || bad "the requests were not batched: mean decode width $width"

# A client that goes away mid-stream: its request leaves the batch (cancelled), the server goes on.
gen0=$(metric atto_generated_tokens_total)
C stream --prompt "User:" --max-tokens 4000 --seed 9 --abort-after 3 >/dev/null
for _ in $(seq 1 50); do [ "$(metric atto_requests_cancelled_total)" == 1 ] && break; sleep 0.1; done
is "cancelled on disconnect" "$(metric atto_requests_cancelled_total)" 1
sleep 0.3
is "nothing left running" "$(metric atto_requests_running)" 0
gen=$(($(metric atto_generated_tokens_total) - gen0))
[ "$gen" -lt 4000 ] && ok || bad "the disconnected request generated all its $gen tokens"
is "serving after a disconnect" "$(C chat --messages "$msgs" --seed 2 --max-tokens 20 --temperature 0 | jq_py 'd["choices"][0]["message"]["content"]')" "$want"
kill -TERM $PID
wait $PID

# --precision bf16 (where the CPU has it): the same requests at once, each = atto sample --precision
# bf16 (decode batches run vdpbf16ps, whose row sums do not depend on the rows beside them).
if "$ATTO" bench gemm --size 32 --steps 1 --fma-seconds 0 --precision bf16 >/dev/null 2>&1; then
  start_server "$CHAT" "$W/serve_bf16.log" --precision bf16 || { finish serve; exit 1; }
  grep -q "; bf16 (" "$W/serve_bf16.log" && ok || bad "the bf16 server does not say so: $(cat "$W/serve_bf16.log")"
  C many --requests "$(cat "$W/many.json")" >"$W/many16.out"
  compare_many "$W/many16.out" bf16 >"$W/many16.cmp"
  is "bf16: concurrent requests = atto sample --precision bf16, each" "$(grep -c ': same$' "$W/many16.cmp")" 8
  grep DIFFERENT "$W/many16.cmp" | head -3
  kill -TERM $PID
  wait $PID
fi

# A seq2seq model: POST /v1/translations (atto's own route; plain HTTP) = atto translate's n-best.
write_toy "$W"
expect_ok "$ATTO" train --task seq2seq --src "$W/toy.src" --tgt "$W/toy.tgt" --tokenizer word --d-model 12 \
  --n-heads 3 --n-enc-layers 1 --n-dec-layers 1 --d-ff 12 --lr 0.01 --steps 300 --dropout 0 --label-smoothing 0 \
  --schedule constant --warmup 0 --eval-bleu 0 --best-by loss --threads 1 -q --out "$W/toy"
start_server "$W/toy" "$W/serve_toy.log" || { finish serve; exit 1; }
want=$("$ATTO" translate --model "$W/toy" --beam 3 --n-best 2 --input "$W/toy.src" | awk -F' [|][|][|] ' '{print $2}')
body=$(python3 -c 'import json,sys; print(json.dumps({"input": open(sys.argv[1]).read().splitlines(), "beam": 3, "n_best": 2}))' "$W/toy.src")
got=$(C raw --path /v1/translations --body "$body" | jq_py '"\n".join(h["text"] for x in d["body"]["data"] for h in x["translations"])')
is "translations = atto translate --beam 3 --n-best 2" "$got" "$want"
is "completions on a seq2seq model" "$(C complete --prompt hello --model toy | err)" "400 None"
kill -TERM $PID
wait $PID
finish serve
