#!/usr/bin/env node
// tests/serve/openai_client.mjs: the client side of atto serve's tests. Every request but `raw`'s
// goes through the OFFICIAL OpenAI Node client (npm's `openai`, pinned in tests/serve/package.json
// and installed by tests/serve/install.sh); the script only parses flags, calls the client and
// prints what came back as ONE JSON object on stdout.
//
//   node tests/serve/openai_client.mjs <command> --base-url http://127.0.0.1:PORT/v1 --api-key KEY
//        [--modules DIR] ...
//   (--modules DIR: the node_modules folder install.sh filled; else NODE_PATH, else the usual
//   resolution)
//
// Options every server command takes:
//   --base-url URL      the API root, ending in /v1 (required)
//   --api-key KEY       sent as "Authorization: Bearer KEY" (required unless --no-auth)
//   --no-auth           send no Authorization header at all
//   --header K:V        an extra request header (repeatable)
//   --timeout S         seconds (default 120) for one whole request, stream included: the client's
//                       own timeout (also set to S) stops once the response's headers arrive, so a
//                       watchdog here aborts the request and fails it (exit 1; in load, a failure).
//   --model NAME        the "model" field; default: the first id of GET /v1/models (one request)
// The client is made with maxRetries: 0 (no silent retries of 429/5xx/connection errors).
//
// Sampling flags (complete, stream, chat, load):
//   --max-tokens N --temperature T --top-p X --seed S --n N
//   --stop S            repeatable: one is sent as a string, several as a list
//   --logprobs K        completions: "logprobs": K; chat: "logprobs": true, "top_logprobs": K
//   --echo              completions only: "echo": true
//   --include-usage     streams: "stream_options": {"include_usage": true}
//   --extra JSON        a JSON object merged last into the request body (llama.cpp's top_k, min_p,
//                       repeat_penalty; or wrong types for bad-request tests: the client sends
//                       unknown and mistyped fields as they are). Its keys override the flags'.
// Numbers must be finite (JSON has no NaN: send such bodies with `raw`).
//
// Commands and their JSON:
//   version                              {"openai": client version, "node"}: no server needed
//                                         (install.sh's check)
//   models                               {"object", "data": [models]}: client.models.list()
//   complete --prompt P | --prompt-file F | --prompts JSON   [sampling flags]
//                                        the completions.create() result as the server sent it
//                                        ({"id", "object", "created", "model", "choices": [{"text",
//                                        "index", "logprobs", "finish_reason"}], "usage"})
//   stream   (same as complete)          stream: true, reassembled from the SSE chunks:
//                                        {"text": [per choice index], "finish_reason": [...],
//                                        "logprobs": [per index, the chunks' arrays concatenated]
//                                        (only when a chunk had logprobs), "usage" (the last
//                                        chunk's usage or null), "chunks" (all chunks),
//                                        "text_chunks" (chunks with non-empty text),
//                                        "first_chunk_ms", "first_text_ms", "total_ms" (from the
//                                        request's start), "ids", "objects", "models" (the
//                                        distinct values seen in the chunks)}
//   chat --messages JSON|@FILE [--stream] [sampling flags]
//                                        chat.completions.create(); with --stream the same
//                                        reassembly as `stream` from the deltas, plus "role"
//                                        [per index] (the delta's role, if one was sent)
//   raw --path /v1/... [--method M] [--body STRING|@FILE | --body-bytes N] [--header K:V]
//                                        plain HTTP with Node's own fetch (no OpenAI client: for
//                                        what the client would not send, e.g. malformed JSON):
//                                        {"status", "content_type", "body" (parsed if JSON, else
//                                        the text), "events" (the "data:" payloads, when the
//                                        reply is text/event-stream)}. Method: POST with a body,
//                                        else GET. Content-Type: application/json with a body,
//                                        Authorization as above, unless --header overrides them.
//                                        --body-bytes N: a JSON body of exactly N bytes (a long
//                                        prompt) built in memory. If the connection fails (e.g.
//                                        the server closes it while the body is still being sent):
//                                        {"status": null, "network_error": "..."} (exit 0).
//   stream ... --abort-after K           stops reading after K chunks with text and closes the
//                                        connection (a client that goes away): what it got so far
//   many --requests JSON                 a list of completion bodies (prompt, max_tokens, seed, n,
//                                        ...), all sent at once as streamed requests; per request in
//                                        order: {"text": [per choice], "finish_reason": [...],
//                                        "first_text_ms", "total_ms"}
//   load --clients C --requests R (--prompt P | --prompt-file F) [sampling flags]
//        [--deadline S] [--server-pid PID [--rss-every K]]
//                                        C concurrent async workers, each doing R streamed
//                                        completions one after the other through one client.
//                                        A request is ok when its stream ended (with or without
//                                        [DONE]: the client does not tell) and every choice seen
//                                        got a finish_reason; else it failed:
//                                        {"ok", "failed", "errors" (the first 5 messages),
//                                        "requests", "chunks", "tokens" (chunks with non-empty
//                                        text), "completion_tokens" (sum of the streams' usage,
//                                        with --include-usage; else null), "seconds",
//                                        "tokens_per_s", "requests_per_s", "ttft_ms" (time to the
//                                        first chunk with text) and "latency_ms" ({"p50", "p99",
//                                        "mean", "max"}), "stopped_early" (--deadline S passed:
//                                        no new request started after it), "rss_kb" (with
//                                        --server-pid: [[requests done, VmRSS of PID], ...] every
//                                        K done requests (default 100), first at 0)}
//
// Errors: an HTTP error answer from the server (the client's APIError: 4xx/5xx, or an error
// object sent inside a stream) prints {"error": {"status" (null inside a stream), "message"
// (the server's error.message, else the client's), "type", "code", "param", "name" (the
// client's error class), "client_message", "body" (the server's "error" value), "in_stream"}}
// and exits 0, for the test to inspect. Exit 1: anything else (connection refused or timed out,
// a response that is not JSON...), the message on stderr; 2: usage. Nothing on stdout unless 0.
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { performance } from "node:perf_hooks";

class UsageError extends Error {}

const BOOL_FLAGS = new Set(["echo", "stream", "no_auth", "include_usage"]);
const REPEATABLE = new Set(["stop", "header"]);

function parseArgs(argv) {
  const opts = { _: [], stop: [], header: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith("--")) { opts._.push(a); continue; }
    const key = a.slice(2).replace(/-/g, "_");
    if (BOOL_FLAGS.has(key)) { opts[key] = true; continue; }
    if (i + 1 >= argv.length) throw new UsageError(`${a} needs a value`);
    const v = argv[++i];
    if (REPEATABLE.has(key)) opts[key].push(v);
    else opts[key] = v;
  }
  return opts;
}

const flagName = (key) => `--${key.replace(/_/g, "-")}`;

function numOpt(opts, key, { integer = false, min } = {}) {
  if (opts[key] === undefined) return undefined;
  const v = Number(opts[key]);
  if (opts[key].trim() === "" || !Number.isFinite(v))
    throw new UsageError(`${flagName(key)} must be a finite number, got '${opts[key]}' (use raw for non-JSON numbers)`);
  if (integer && !Number.isInteger(v)) throw new UsageError(`${flagName(key)} must be an integer, got '${opts[key]}'`);
  if (min !== undefined && v < min) throw new UsageError(`${flagName(key)} must be >= ${min}, got '${opts[key]}'`);
  return v;
}

function jsonOpt(opts, key) {
  if (opts[key] === undefined) return undefined;
  let text = opts[key];
  if (text.startsWith("@")) {
    try { text = fs.readFileSync(text.slice(1), "utf8"); } catch (e) { throw new UsageError(`${flagName(key)}: ${e.message}`); }
  }
  try { return JSON.parse(text); } catch (e) { throw new UsageError(`${flagName(key)}: not JSON: ${e.message}`); }
}

function headerPairs(opts) {
  return opts.header.map((h) => {
    const i = h.indexOf(":");
    if (i <= 0) throw new UsageError(`--header must be K:V, got '${h}'`);
    return [h.slice(0, i).trim(), h.slice(i + 1).trim()];
  });
}

// The official client from --modules DIR, else NODE_PATH, else the usual resolution.
async function loadOpenAI(opts) {
  const bases = [];
  if (opts.modules) bases.push(path.resolve(opts.modules));
  for (const p of (process.env.NODE_PATH ?? "").split(path.delimiter)) if (p) bases.push(path.resolve(p));
  for (const base of bases) {
    const pkg = path.join(base, "openai", "package.json");
    if (fs.existsSync(pkg)) {
      const version = JSON.parse(fs.readFileSync(pkg, "utf8")).version;
      const mod = await import(pathToFileURL(path.join(base, "openai", "index.mjs")).href);
      return { mod, version };
    }
  }
  try {
    const mod = await import("openai");
    return { mod, version: "unknown" };
  } catch (e) {
    throw new Error(`the openai package was not found (give --modules DIR or NODE_PATH; tests/serve/install.sh installs it): ${e.message}`);
  }
}

function makeClient(opts, mod) {
  if (!opts.base_url) throw new UsageError("--base-url URL is required (e.g. http://127.0.0.1:8080/v1)");
  if (opts.api_key === undefined && !opts.no_auth) throw new UsageError("--api-key KEY is required (or --no-auth)");
  const timeout = timeoutOpt(opts);
  const defaultHeaders = Object.fromEntries(headerPairs(opts));
  // A null header removes it: with --no-auth the client sends no Authorization at all.
  if (opts.no_auth) defaultHeaders.Authorization = null;
  return new mod.OpenAI({
    baseURL: opts.base_url,
    apiKey: opts.no_auth ? "unused" : opts.api_key,
    organization: null,   // never from OPENAI_ORG_ID / OPENAI_PROJECT_ID in the environment
    project: null,
    maxRetries: 0,
    timeout: timeout * 1000,
    defaultHeaders,
    // The client's log (OPENAI_LOG=debug... in the environment) goes to stderr: stdout is the JSON.
    logger: Object.fromEntries(["error", "warn", "info", "debug"].map((k) => [k, (...a) => console.error(...a)])),
  });
}

// The client's own timeout stops at the response's headers; this one covers a whole request,
// body and stream included. Aborting through the signal makes the client end a stream quietly
// (as if it were complete), so the caller must check expired() after reading it.
function deadline(seconds) {
  const controller = new AbortController();
  let expired = false;
  const timer = setTimeout(() => { expired = true; controller.abort(); }, seconds * 1000);
  return {
    options: { signal: controller.signal },
    expired: () => expired,
    check: () => { if (expired) throw new Error(`timed out: no complete answer within --timeout ${seconds} s`); },
    clear: () => clearTimeout(timer),
  };
}

const timeoutOpt = (opts) => numOpt(opts, "timeout", { min: 0 }) ?? 120;

async function modelName(opts, client) {
  if (opts.model !== undefined) return opts.model;
  const page = await client.models.list();
  if (!page.data.length) throw new Error("GET /models listed no model (give --model)");
  return page.data[0].id;
}

function promptOpt(opts, required = true) {
  const given = ["prompt", "prompt_file", "prompts"].filter((k) => opts[k] !== undefined);
  if (given.length > 1) throw new UsageError("give one of --prompt, --prompt-file, --prompts");
  if (opts.prompt !== undefined) return opts.prompt;
  if (opts.prompt_file !== undefined) {
    try { return fs.readFileSync(opts.prompt_file, "utf8"); } catch (e) { throw new UsageError(`--prompt-file: ${e.message}`); }
  }
  if (opts.prompts !== undefined) return jsonOpt(opts, "prompts");
  if (required) throw new UsageError("--prompt P (or --prompt-file F, or --prompts JSON) is required");
  return undefined;
}

// The request body's sampling fields from the flags, then --extra over them.
function bodyFields(opts, chat) {
  const p = {};
  const set = (field, v) => { if (v !== undefined) p[field] = v; };
  set("max_tokens", numOpt(opts, "max_tokens"));
  set("temperature", numOpt(opts, "temperature"));
  set("top_p", numOpt(opts, "top_p"));
  set("seed", numOpt(opts, "seed"));
  set("n", numOpt(opts, "n"));
  if (opts.stop.length === 1) p.stop = opts.stop[0];
  else if (opts.stop.length > 1) p.stop = opts.stop;
  const lp = numOpt(opts, "logprobs");
  if (lp !== undefined) {
    if (chat) { p.logprobs = true; p.top_logprobs = lp; } else p.logprobs = lp;
  }
  if (opts.echo) {
    if (chat) throw new UsageError("--echo is for completions only");
    p.echo = true;
  }
  const extra = jsonOpt(opts, "extra");
  if (extra !== undefined && (extra === null || typeof extra !== "object" || Array.isArray(extra)))
    throw new UsageError("--extra must be a JSON object");
  return { ...p, ...(extra ?? {}) };
}

function streamFields(opts) {
  return opts.include_usage ? { stream: true, stream_options: { include_usage: true } } : { stream: true };
}

// A non-streamed result: the client returns the body as a string when the server's Content-Type
// is not JSON; that is a server bug, not something to compare.
async function jsonResult(opts, create) {
  const dl = deadline(timeoutOpt(opts));
  let data, response;
  try {
    ({ data, response } = await create(dl.options).withResponse());
  } catch (e) {
    dl.check();
    throw e;
  } finally {
    dl.clear();
  }
  if (data === null || typeof data !== "object")
    throw new Error(`the response is not a JSON object (HTTP ${response.status}, Content-Type: ${response.headers.get("content-type")}): ${String(data).slice(0, 300)}`);
  return data;
}

// Reassembles streamed chunks (completions: choice.text; chat: choice.delta) per choice index.
class StreamAccumulator {
  constructor(chat, t0) {
    this.chat = chat;
    this.t0 = t0;
    this.text = [];
    this.role = [];
    this.finish = [];
    this.logprobs = [];
    this.anyLogprobs = false;
    this.usage = null;
    this.chunks = 0;
    this.textChunks = 0;
    this.firstChunkMs = null;
    this.firstTextMs = null;
    this.ids = new Set();
    this.objects = new Set();
    this.models = new Set();
  }

  add(chunk) {
    const t = performance.now() - this.t0;
    this.chunks++;
    if (this.firstChunkMs === null) this.firstChunkMs = t;
    this.ids.add(chunk.id);
    this.objects.add(chunk.object);
    this.models.add(chunk.model);
    if (chunk.usage) this.usage = chunk.usage;
    let hadText = false;
    for (const c of chunk.choices ?? []) {
      const i = c.index;
      if (!Number.isInteger(i) || i < 0) throw new Error(`a chunk's choice has no valid index: ${JSON.stringify(c)}`);
      if (this.text[i] === undefined) { this.text[i] = ""; this.finish[i] = null; }
      const piece = this.chat ? c.delta?.content : c.text;
      if (typeof piece === "string" && piece.length) { this.text[i] += piece; hadText = true; }
      if (this.chat && c.delta?.role) this.role[i] = c.delta.role;
      if (c.finish_reason != null) this.finish[i] = c.finish_reason;
      if (c.logprobs) this.addLogprobs(i, c.logprobs);
    }
    if (hadText) {
      this.textChunks++;
      if (this.firstTextMs === null) this.firstTextMs = t;
    }
  }

  addLogprobs(i, lp) {
    this.anyLogprobs = true;
    if (this.chat) {
      const acc = (this.logprobs[i] ??= { content: [] });
      if (Array.isArray(lp.content)) acc.content.push(...lp.content);
      return;
    }
    const acc = (this.logprobs[i] ??= { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] });
    for (const k of Object.keys(acc)) if (Array.isArray(lp[k])) acc[k].push(...lp[k]);
  }

  result() {
    const fill = (a, v) => Array.from({ length: this.text.length }, (_, i) => a[i] ?? v);
    const out = {
      text: fill(this.text, ""),
      finish_reason: fill(this.finish, null),
    };
    if (this.chat) out.role = fill(this.role, null);
    if (this.anyLogprobs) out.logprobs = fill(this.logprobs, null);
    Object.assign(out, {
      usage: this.usage,
      chunks: this.chunks,
      text_chunks: this.textChunks,
      first_chunk_ms: this.firstChunkMs,
      first_text_ms: this.firstTextMs,
      total_ms: performance.now() - this.t0,
      ids: [...this.ids],
      objects: [...this.objects],
      models: [...this.models],
    });
    return out;
  }
}

async function runStream(opts, create, chat) {
  const dl = deadline(timeoutOpt(opts));
  const t0 = performance.now();
  const acc = new StreamAccumulator(chat, t0);
  const abortAfter = numOpt(opts, "abort_after", { integer: true, min: 1 });
  try {
    const stream = await create(dl.options);
    for await (const chunk of stream) {
      acc.add(chunk);
      if (abortAfter !== undefined && acc.textChunks >= abortAfter) {
        stream.controller.abort();   // the client goes away mid-stream: the connection closes
        break;
      }
    }
  } catch (e) {
    dl.check();
    throw e;
  } finally {
    dl.clear();
  }
  dl.check();
  return acc.result();
}

async function cmdComplete(opts, client, stream) {
  const prompt = promptOpt(opts);
  const model = await modelName(opts, client);
  const params = { model, prompt, ...bodyFields(opts, false) };
  if (!stream) return jsonResult(opts, (o) => client.completions.create({ ...params, stream: false }, o));
  return runStream(opts, (o) => client.completions.create({ ...params, ...streamFields(opts) }, o), false);
}

// Many streamed completions at once, each its own request body, all sent together.
async function cmdMany(opts, client) {
  const list = jsonOpt(opts, "requests");
  if (!Array.isArray(list) || !list.length || list.some((r) => r === null || typeof r !== "object" || Array.isArray(r)))
    throw new UsageError("--requests must be a JSON list of request objects");
  const model = await modelName(opts, client);
  return Promise.all(list.map((body) =>
    runStream(opts, (o) => client.completions.create({ model, ...body, stream: true }, o), false)
      .then((r) => ({ text: r.text, finish_reason: r.finish_reason, first_text_ms: r.first_text_ms, total_ms: r.total_ms }))));
}

async function cmdChat(opts, client) {
  const messages = jsonOpt(opts, "messages");
  if (messages === undefined) throw new UsageError("--messages JSON (or @FILE) is required");
  const model = await modelName(opts, client);
  const params = { model, messages, ...bodyFields(opts, true) };
  if (!opts.stream) return jsonResult(opts, (o) => client.chat.completions.create({ ...params, stream: false }, o));
  return runStream(opts, (o) => client.chat.completions.create({ ...params, ...streamFields(opts) }, o), true);
}

async function cmdModels(opts, client) {
  const page = await client.models.list();
  return { object: page.object, data: page.data };
}

// Plain HTTP through Node's fetch, for requests the client would not send.
async function cmdRaw(opts) {
  if (!opts.base_url) throw new UsageError("--base-url URL is required");
  if (!opts.path || !opts.path.startsWith("/")) throw new UsageError("--path /v1/... is required (an absolute path)");
  const url = new URL(opts.path, opts.base_url).href;
  let body;
  if (opts.body !== undefined && opts.body_bytes !== undefined) throw new UsageError("give --body or --body-bytes, not both");
  if (opts.body !== undefined) {
    if (opts.body.startsWith("@")) {
      try { body = fs.readFileSync(opts.body.slice(1)); } catch (e) { throw new UsageError(`--body: ${e.message}`); }
    } else body = opts.body;
  } else if (opts.body_bytes !== undefined) {
    const n = numOpt(opts, "body_bytes", { integer: true, min: 32 });
    const head = Buffer.from('{"model":"x","prompt":"'), tail = Buffer.from('"}');
    body = Buffer.alloc(n, "a");
    head.copy(body, 0);
    tail.copy(body, n - tail.length);
  }
  const headers = {};
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (!opts.no_auth && opts.api_key !== undefined) headers.Authorization = `Bearer ${opts.api_key}`;
  for (const [k, v] of headerPairs(opts)) {
    for (const old of Object.keys(headers)) if (old.toLowerCase() === k.toLowerCase()) delete headers[old];
    headers[k] = v;
  }
  const method = (opts.method ?? (body !== undefined ? "POST" : "GET")).toUpperCase();
  const timeout = timeoutOpt(opts);
  let res, text;
  try {
    res = await fetch(url, { method, headers, body, signal: AbortSignal.timeout(timeout * 1000) });
    text = await res.text();
  } catch (e) {
    let cause = "";
    for (let c = e.cause, depth = 0; c && depth < 4; c = c.cause, depth++) cause += ` <- ${c.code ? `${c.code} ` : ""}${c.message ?? c}`;
    return { status: res?.status ?? null, network_error: `${e.name}: ${e.message}${cause}` };
  }
  const contentType = res.headers.get("content-type");
  let parsed = text;
  try { parsed = JSON.parse(text); } catch { /* not JSON: the text */ }
  const out = { status: res.status, content_type: contentType, body: parsed };
  if (contentType?.startsWith("text/event-stream")) {
    out.events = text.split(/\r?\n/).filter((l) => l.startsWith("data:")).map((l) => l.slice(5).replace(/^ /, ""));
  }
  return out;
}

function percentiles(xs) {
  if (!xs.length) return { p50: null, p99: null, mean: null, max: null };
  const s = [...xs].sort((a, b) => a - b);
  const rank = (p) => s[Math.min(s.length, Math.max(1, Math.ceil((p / 100) * s.length))) - 1];
  return { p50: rank(50), p99: rank(99), mean: s.reduce((a, b) => a + b, 0) / s.length, max: s[s.length - 1] };
}

function rssKb(pid) {
  try {
    const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

async function cmdLoad(opts, client) {
  const clients = numOpt(opts, "clients", { integer: true, min: 1 });
  const requests = numOpt(opts, "requests", { integer: true, min: 1 });
  if (clients === undefined || requests === undefined) throw new UsageError("--clients C and --requests R are required");
  const stopAfter = numOpt(opts, "deadline", { min: 0 });
  const pid = numOpt(opts, "server_pid", { integer: true, min: 1 });
  const rssEvery = numOpt(opts, "rss_every", { integer: true, min: 1 }) ?? 100;
  const timeout = timeoutOpt(opts);
  const prompt = promptOpt(opts);
  const model = await modelName(opts, client);
  const params = { model, prompt, ...bodyFields(opts, false), ...streamFields(opts) };

  const st = { ok: 0, failed: 0, errors: [], chunks: 0, tokens: 0, completionTokens: 0, usageSeen: 0,
               ttft: [], latency: [], done: 0, rss: [], stoppedEarly: false };
  if (pid !== undefined) st.rss.push([0, rssKb(pid)]);
  const t0 = performance.now();
  const endAt = stopAfter === undefined ? Infinity : t0 + stopAfter * 1000;

  async function one() {
    const t = performance.now();
    const dl = deadline(timeout);
    try {
      let first = null;
      const finished = new Map();   // choice index -> finish_reason seen
      try {
        const stream = await client.completions.create(params, dl.options);
        for await (const chunk of stream) {
          st.chunks++;
          if (chunk.usage) { st.completionTokens += chunk.usage.completion_tokens ?? 0; st.usageSeen++; }
          let text = false;
          for (const c of chunk.choices ?? []) {
            if (!finished.has(c.index)) finished.set(c.index, null);
            if (c.finish_reason != null) finished.set(c.index, c.finish_reason);
            if (typeof c.text === "string" && c.text.length) text = true;
          }
          if (text) {
            st.tokens++;
            if (first === null) first = performance.now() - t;
          }
        }
      } catch (e) {
        dl.check();
        throw e;
      } finally {
        dl.clear();
      }
      dl.check();
      if (!finished.size || [...finished.values()].includes(null))
        throw new Error("the stream ended without a finish_reason for every choice");
      st.ok++;
      if (first !== null) st.ttft.push(first);
      st.latency.push(performance.now() - t);
    } catch (e) {
      st.failed++;
      if (st.errors.length < 5) st.errors.push(`${e.constructor?.name ?? "Error"}: ${e.message}`);
    }
    st.done++;
    if (pid !== undefined && st.done % rssEvery === 0) st.rss.push([st.done, rssKb(pid)]);
  }

  async function worker() {
    for (let r = 0; r < requests; r++) {
      if (performance.now() >= endAt) { st.stoppedEarly = true; return; }
      await one();
    }
  }
  await Promise.all(Array.from({ length: clients }, worker));
  const seconds = (performance.now() - t0) / 1000;
  if (pid !== undefined && st.rss[st.rss.length - 1]?.[0] !== st.done) st.rss.push([st.done, rssKb(pid)]);
  const out = {
    ok: st.ok,
    failed: st.failed,
    errors: st.errors,
    requests: st.done,
    clients,
    chunks: st.chunks,
    tokens: st.tokens,
    completion_tokens: st.usageSeen ? st.completionTokens : null,
    seconds,
    tokens_per_s: st.tokens / seconds,
    requests_per_s: st.done / seconds,
    ttft_ms: percentiles(st.ttft),
    latency_ms: percentiles(st.latency),
    stopped_early: st.stoppedEarly,
  };
  if (pid !== undefined) out.rss_kb = st.rss;
  return out;
}

let apiMod = null;   // the loaded openai module (its error classes)

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const [cmd, ...rest] = opts._;
  if (!cmd) throw new UsageError("usage: openai_client.mjs <version|models|complete|stream|chat|raw|load|many> --base-url URL --api-key KEY ...");
  if (rest.length) throw new UsageError(`unexpected arguments: ${rest.join(" ")}`);
  if (cmd === "raw") return cmdRaw(opts);
  const { mod, version } = await loadOpenAI(opts);
  apiMod = mod;
  if (cmd === "version") return { openai: version, node: process.versions.node };
  const client = makeClient(opts, mod);
  switch (cmd) {
    case "models": return cmdModels(opts, client);
    case "complete": return cmdComplete(opts, client, false);
    case "stream": return cmdComplete(opts, client, true);
    case "chat": return cmdChat(opts, client);
    case "load": return cmdLoad(opts, client);
    case "many": return cmdMany(opts, client);
    default: throw new UsageError(`unknown command '${cmd}'`);
  }
}

function finish(code, stdout) {
  if (stdout === undefined) { process.exitCode = code; return process.exit(code); }
  process.stdout.write(stdout + "\n", () => process.exit(code));
}

main().then(
  (out) => finish(0, JSON.stringify(out)),
  (e) => {
    // An HTTP error answer (not a connection failure): the JSON the test inspects.
    if (apiMod && e instanceof apiMod.APIError && !(e instanceof apiMod.APIConnectionError) && !(e instanceof apiMod.APIUserAbortError)) {
      const inner = e.error;
      return finish(0, JSON.stringify({
        error: {
          status: e.status ?? null,
          message: (inner && typeof inner === "object" && typeof inner.message === "string") ? inner.message : e.message,
          type: e.type ?? null,
          code: e.code ?? null,
          param: e.param ?? null,
          name: e.constructor.name,
          client_message: e.message,
          body: inner ?? null,
          in_stream: e.status === undefined,
        },
      }));
    }
    let cause = "";
    for (let c = e?.cause, depth = 0; c && depth < 4; c = c.cause, depth++) cause += ` <- ${c.code ? `${c.code} ` : ""}${c.message ?? c}`;
    process.stderr.write(`openai_client.mjs: ${e?.constructor?.name ?? "Error"}: ${e?.message ?? e}${cause}\n`);
    finish(e instanceof UsageError ? 2 : 1);
  },
);
