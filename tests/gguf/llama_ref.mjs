#!/usr/bin/env node
// tests/gguf/llama_ref.mjs: the reference client for atto's GGUF export. It loads a GGUF with
// the REAL llama.cpp (the prebuilt CPU libraries that npm's node-llama-cpp ships, installed by
// tests/gguf/install.sh) and prints what llama.cpp makes of it, as ONE JSON object on stdout.
//
//   NODE_PATH=build/node/node_modules node tests/gguf/llama_ref.mjs <command> --model F.gguf ...
//   (or --modules DIR: the node_modules folder that install.sh filled)
//
// Options every command takes: --model FILE.gguf (all but check), --modules DIR, --verbose
// (llama.cpp's log on stderr), --threads N (default 1: node-llama-cpp's own default, max(cores,
// 4), oversubscribes a small machine and ggml's spinning threads then crawl), --kv-type f32|f16
// and --flash-attention off|on|auto (defaults f32 and off: the most exact configuration llama.cpp
// has; `--kv-type f16 --flash-attention auto` is llama.cpp's stock one, ~1e-2 further away),
// --lora ADAPTER.gguf (a LoRA adapter GGUF, `atto export --lora-only`, applied at scale 1 to every
// context over --model, its base: llama-cli -m BASE --lora ADAPTER).
//
// Commands and their JSON:
//   check                        {"node_llama_cpp", "llama_cpp", "build": "prebuilt", "gpu",
//                                 "cpu_math_cores"}: loads llama.cpp only (install.sh's test)
//   info                         {"architecture", "n_vocab" (llama.cpp's: one logits row),
//                                 "n_vocab_gguf" (tokenizer.ggml.tokens), "n_ctx_train", "n_embd",
//                                 "bos", "eos", "eot" (null unless a CONTROL-type token),
//                                 "eog" (every id llama.cpp ends generation on), "add_bos",
//                                 "vocabulary_type", "description", "build", "llama_cpp",
//                                 "node_llama_cpp"}
//   tokenize --input F.txt       {"tokens": [[ids of line 1], ...]}: each line of F (UTF-8, split
//                                 on "\n", a final empty line dropped), raw text: no BOS/EOS,
//                                 special-token text not parsed (specialTokens: false)
//   detokenize --input F.json    F = [[ids], ...] -> {"texts": ["...", ...]} (special tokens give
//                                 no text, as common_token_to_piece(special = false))
//   logprobs --input F.json      F = [[ids], ...]; each sequence is evaluated in one batch (chunks
//            [--full]            only for huge vocabularies) of a fresh state of one context.
//                                 Default: {"targets": [[log p(s[i+1] | s[..i]) for i in
//                                 0..n-2], ...]} (n >= 2; s[n-1] is not evaluated, so n may be
//                                 n_ctx_train + 1). --full: {"logprobs": [[[V floats] for i in
//                                 0..n-1], ...]}: the log-softmax over the whole vocabulary of
//                                 llama.cpp's raw next-token logits at every position (computed
//                                 here in float64 from llama.cpp's float32 logits).
//   generate --input F.json      F = [[prompt ids], ...]; greedy decoding (temperature 0: top-1,
//            [--max-tokens 100]  no penalties, no other sampler) -> {"generated": [[ids], ...],
//                                 "stop": ["eog" | "max_tokens" | "context", ...]}. An EOG token
//                                 (EOS/EOT...) that stops a sample IS included as its last id.
//                                 "context": the sequence reached n_ctx_train + 1 tokens (the last
//                                 generated token was predicted from n_ctx_train positions).
//   bench --prompt-tokens N      {"prompt_tokens", "gen_tokens", "threads", "reps",
//         --gen-tokens M          "prompt_s", "prompt_tok_per_s"  (N tokens, no logits),
//         [--reps R]              "prompt_logits_s", "prompt_logits_tok_per_s" (N tokens, then
//                                 the logits of the last and one greedy sample),
//                                 "gen_s", "gen_tok_per_s" (M single-token decodes, greedy, batch
//                                 1, after an (N-1)-token prompt)}: the best of R repetitions
//                                 (default 1, after one untimed warm-up), wall clock
//                                 (performance.now()); prompt ids 1, 2, ... V-1, 1, ...;
//                                 N + M <= n_ctx_train.
//
// Sequences never get longer than the model's n_ctx_train: llama.cpp's gpt2 reads its position
// table by position (GGML_ASSERT in get_rows, an abort, past it), and node-llama-cpp rounds every
// llama.cpp context up to a multiple of 256 (and silently shifts its own context when full), so
// this script checks the lengths itself and exits 2 with a message instead.
// Exit status: 0 with the JSON on stdout; 1 llama.cpp failed (a corrupt or unloadable GGUF, the
// message on stderr; a GGML_ASSERT inside llama.cpp aborts the process instead: 134); 2 usage or
// bad input. Nothing on stdout unless 0.
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { performance } from "node:perf_hooks";

class UsageError extends Error {}

// Logits held at once by `logprobs` (rows x vocabulary): longer sequences go in chunks.
const MAX_LOGITS_HELD = 1 << 22;

function parseArgs(argv) {
  const flags = new Set(["full", "verbose"]);
  const opts = { _: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith("--")) { opts._.push(a); continue; }
    const key = a.slice(2).replace(/-/g, "_");
    if (flags.has(key)) { opts[key] = true; continue; }
    if (i + 1 >= argv.length) throw new UsageError(`${a} needs a value`);
    opts[key] = argv[++i];
  }
  return opts;
}

function intOpt(opts, key, def, min = 0) {
  if (opts[key] === undefined) return def;
  const v = Number(opts[key]);
  if (!Number.isInteger(v) || v < min)
    throw new UsageError(`--${key.replace(/_/g, "-")} must be an integer >= ${min}, got '${opts[key]}'`);
  return v;
}

function readJsonSequences(file, what) {
  let data;
  try {
    data = JSON.parse(fs.readFileSync(file, "utf8"));
  } catch (e) {
    throw new UsageError(`${file}: ${e.message}`);
  }
  if (!Array.isArray(data) || !data.every((s) => Array.isArray(s) && s.every((t) => Number.isInteger(t) && t >= 0)))
    throw new UsageError(`${file}: expected a JSON list of lists of token ids (${what})`);
  return data;
}

// node-llama-cpp from --modules DIR, else NODE_PATH / the usual resolution.
async function loadNodeLlamaCpp(opts) {
  const bases = [];
  if (opts.modules) bases.push(path.resolve(opts.modules));
  for (const p of (process.env.NODE_PATH ?? "").split(path.delimiter)) if (p) bases.push(path.resolve(p));
  for (const base of bases) {
    const pkg = path.join(base, "node-llama-cpp", "package.json");
    if (fs.existsSync(pkg)) {
      const version = JSON.parse(fs.readFileSync(pkg, "utf8")).version;
      const entry = path.join(base, "node-llama-cpp", "dist", "index.js");
      return { mod: await import(pathToFileURL(entry).href), version };
    }
  }
  try {
    const mod = await import("node-llama-cpp");
    return { mod, version: "unknown" };
  } catch (e) {
    throw new Error(`node-llama-cpp not found (give --modules DIR or NODE_PATH; tests/gguf/install.sh installs it): ${e.message}`);
  }
}

async function openModel(opts, needModel = true) {
  if (needModel && !opts.model) throw new UsageError("--model FILE.gguf is required");
  if (needModel && !fs.existsSync(opts.model)) throw new UsageError(`${opts.model}: no such file`);
  if (opts.lora !== undefined && !fs.existsSync(opts.lora)) throw new UsageError(`--lora ${opts.lora}: no such file`);
  // One thread unless told: node-llama-cpp's default (max(cores, 4)) oversubscribes a small
  // machine, and ggml's spinning threads then slow down by orders of magnitude.
  const threads = intOpt(opts, "threads", 1, 1);
  const kvType = (opts.kv_type ?? "f32").toUpperCase();
  if (!["F32", "F16"].includes(kvType)) throw new UsageError(`--kv-type must be f32 or f16, got '${opts.kv_type}'`);
  const fa = opts.flash_attention ?? "off";
  if (!["on", "off", "auto"].includes(fa)) throw new UsageError(`--flash-attention must be on, off or auto, got '${fa}'`);
  const { mod, version } = await loadNodeLlamaCpp(opts);
  const { getLlama, LlamaLogLevel } = mod;
  const logs = [];
  const llama = await getLlama({
    build: "never",            // prebuilt binaries only: never compile llama.cpp from source
    skipDownload: true,        // and never download its source
    usePrebuiltBinaries: true,
    gpu: false,                // the CPU backends (the package set installed has no GPU ones)
    progressLogs: false,
    maxThreads: 0,             // 0: a context uses exactly the thread count it is given
    logLevel: opts.verbose ? LlamaLogLevel.debug : LlamaLogLevel.warn,
    logger: (level, message) => {
      logs.push(message);
      if (opts.verbose || level === "error" || level === "fatal") process.stderr.write(`[llama.cpp ${level}] ${message}\n`);
    },
  });
  if (llama.buildType !== "prebuilt")
    throw new Error(`the llama.cpp binary found is a "${llama.buildType}" build, not node-llama-cpp's prebuilt one`);
  if (!needModel) return { llama, threads, version };
  let model;
  try {
    model = await llama.loadModel({ modelPath: path.resolve(opts.model), gpuLayers: 0 });
  } catch (e) {
    const tail = logs.slice(-3).join(" | ");
    throw new Error(`llama.cpp could not load ${opts.model}: ${e.message}${tail ? ` (log: ${tail})` : ""}`);
  }
  const lora = opts.lora === undefined ? undefined : path.resolve(opts.lora);
  return { llama, model, threads, version, kvType, flashAttention: fa === "auto" ? "auto" : fa === "on", lora, logs };
}

// A context that holds n_ctx_train tokens. node-llama-cpp keeps one cell of a context free (it
// shifts the context, erasing its beginning, before a token would fill the last cell), hence the
// + 1; and a shift would silently change every later logit, so this one throws instead.
async function newContext(m, nCtx, batchSize) {
  const opts = { contextSize: nCtx + 1, batchSize: Math.max(1, batchSize), sequences: 1 };
  // Defaults: the most exact configuration llama.cpp has (f32 KV cache, no flash attention);
  // --kv-type f16 --flash-attention auto give llama.cpp's stock one.
  opts.experimentalKvCacheKeyType = opts.experimentalKvCacheValueType = m.kvType;
  opts.flashAttention = m.flashAttention;
  opts.threads = { ideal: m.threads, min: m.threads };
  if (m.lora) opts.lora = { adapters: [{ filePath: m.lora, scale: 1 }] };
  let context;
  try {
    context = await m.model.createContext(opts);
  } catch (e) {
    const tail = m.logs.slice(-3).join(" | ");
    throw new Error(`llama.cpp could not create a context${m.lora ? ` with the LoRA adapter ${m.lora}` : ""}: ${e.message}${tail ? ` (log: ${tail})` : ""}`);
  }
  const sequence = context.getSequence({
    contextShift: {
      strategy: () => {
        throw new Error(`node-llama-cpp wanted to shift the context (more than ${nCtx} tokens in it)`);
      },
    },
  });
  return { context, sequence };
}

function checkLength(seqs, nCtx, what, extra = 0) {
  seqs.forEach((s, i) => {
    if (s.length === 0) throw new UsageError(`${what} ${i} is empty`);
    if (s.length + extra > nCtx)
      throw new UsageError(`${what} ${i} has ${s.length}${extra ? ` + ${extra}` : ""} tokens, more than n_ctx_train = ${nCtx}`);
  });
}

function checkIds(seqs, nVocab, what) {
  seqs.forEach((s, i) => s.forEach((t) => {
    if (t >= nVocab) throw new UsageError(`${what} ${i} has token id ${t} >= n_vocab = ${nVocab}`);
  }));
}

// Calls onRow(i, logits) with llama.cpp's raw next-token logits (a Map token -> logit over the
// whole vocabulary) after every position i of `seq`, evaluated in a fresh state of `sequence`.
// The sequence goes in as one batch unless rowsPerChunk is smaller (huge vocabularies): then in
// consecutive chunks on the same KV cache, so that only one chunk of rows is held at a time.
// Temperature 0 makes node-llama-cpp's sampler chain the greedy sampler alone, which picks a
// token without changing any logit.
async function forEachLogitsRow(sequence, seq, onRow, rowsPerChunk = seq.length) {
  await sequence.clearHistory();
  for (let start = 0; start < seq.length; start += rowsPerChunk) {
    const chunk = seq.slice(start, start + rowsPerChunk);
    const out = await sequence.controlledEvaluate(
      chunk.map((t) => [t, { generateNext: { logits: true, options: { temperature: 0 } } }]));
    chunk.forEach((_, j) => {
      const logits = out[j]?.next?.logits;
      if (!logits) throw new Error(`llama.cpp returned no logits for position ${start + j}`);
      onRow(start + j, logits);
    });
  }
}

function logSoftmax(map, nVocab) {
  if (map.size !== nVocab) throw new Error(`a logits row has ${map.size} entries, n_vocab is ${nVocab}`);
  const row = new Float64Array(nVocab);
  let max = -Infinity;
  for (const [t, v] of map) { row[t] = v; if (v > max) max = v; }
  let sum = 0;
  for (let t = 0; t < nVocab; t++) sum += Math.exp(row[t] - max);
  const lse = max + Math.log(sum);
  for (let t = 0; t < nVocab; t++) row[t] -= lse;
  return row;
}

async function vocabSize(m) {
  // llama.cpp's n_vocab (llama_vocab_n_tokens): the length of one logits row.
  const { context, sequence } = await newContext(m, m.model.trainContextSize, 1);
  try {
    let size = 0;
    await forEachLogitsRow(sequence, [m.model.tokens.bos ?? m.model.tokens.eos ?? 0], (_, row) => { size = row.size; });
    return size;
  } finally {
    await context.dispose();
  }
}

async function cmdInfo(m) {
  const model = m.model;
  const meta = model.fileInfo?.metadata ?? {};
  const ggufTokens = meta.tokenizer?.ggml?.tokens;
  const eos = model.tokens.eos;
  const nVocab = await vocabSize(m);
  const eog = [];
  for (let t = 0; t < nVocab; t++) if (model.isEogToken(t)) eog.push(t);
  return {
    architecture: model.fileInfo?.metadata?.general?.architecture ?? null,
    n_vocab: nVocab,
    n_vocab_gguf: Array.isArray(ggufTokens) ? ggufTokens.length : null,
    n_ctx_train: model.trainContextSize,
    n_embd: model.embeddingVectorSize,
    bos: model.tokens.bos,
    eos,
    eot: model.tokens.eot,
    eog,
    add_bos: model.tokens.shouldPrependBosToken,
    vocabulary_type: model.vocabularyType,
    description: model.typeDescription,
    build: m.llama.buildType,
    llama_cpp: m.llama.llamaCppRelease,
    node_llama_cpp: m.version,
  };
}

function cmdTokenize(m, opts) {
  if (!opts.input) throw new UsageError("tokenize needs --input FILE");
  const text = fs.readFileSync(opts.input, "utf8");
  const lines = text.split("\n");
  if (lines.length > 0 && lines[lines.length - 1] === "") lines.pop();
  return { tokens: lines.map((line) => Array.from(m.model.tokenize(line, false))) };
}

function cmdDetokenize(m, opts) {
  if (!opts.input) throw new UsageError("detokenize needs --input FILE.json");
  const seqs = readJsonSequences(opts.input, "token ids");
  return { texts: seqs.map((s) => m.model.detokenize(s, false)) };
}

async function cmdLogprobs(m, opts) {
  if (!opts.input) throw new UsageError("logprobs needs --input FILE.json");
  const seqs = readJsonSequences(opts.input, "token-id sequences");
  const nCtx = m.model.trainContextSize;
  // Targets need no logits after the last token, so it is not evaluated: a sequence may then
  // have n_ctx_train + 1 tokens (a whole training window plus its last target).
  const evalLen = (s) => (opts.full ? s.length : s.length - 1);
  seqs.forEach((s, i) => {
    if (s.length < (opts.full ? 1 : 2)) throw new UsageError(`sequence ${i} has ${s.length} tokens, too few`);
    if (evalLen(s) > nCtx)
      throw new UsageError(`sequence ${i} has ${s.length} tokens, more than n_ctx_train${opts.full ? "" : " + 1"} = ${nCtx + (opts.full ? 0 : 1)}`);
  });
  const nVocab = await vocabSize(m);
  checkIds(seqs, nVocab, "sequence");
  const maxLen = Math.max(...seqs.map(evalLen));
  const { context, sequence } = await newContext(m, nCtx, maxLen);
  try {
    const result = [];
    const rowsPerChunk = Math.max(1, Math.floor(MAX_LOGITS_HELD / nVocab));
    for (const seq of seqs) {
      const rows = [];
      await forEachLogitsRow(sequence, seq.slice(0, evalLen(seq)), (i, logits) => {
        const lp = logSoftmax(logits, nVocab);
        rows.push(opts.full ? Array.from(lp) : lp[seq[i + 1]]);
      }, rowsPerChunk);
      result.push(rows);
    }
    return opts.full ? { logprobs: result } : { targets: result };
  } finally {
    await context.dispose();
  }
}

async function cmdGenerate(m, opts) {
  if (!opts.input) throw new UsageError("generate needs --input FILE.json");
  const prompts = readJsonSequences(opts.input, "prompt token-id sequences");
  const maxTokens = intOpt(opts, "max_tokens", 100, 1);
  const nCtx = m.model.trainContextSize;
  checkLength(prompts, nCtx, "prompt");
  checkIds(prompts, await vocabSize(m), "prompt");
  const maxLen = Math.max(...prompts.map((s) => s.length));
  const { context, sequence } = await newContext(m, nCtx, maxLen);
  try {
    const generated = [];
    const stops = [];
    for (const prompt of prompts) {
      await sequence.clearHistory();
      // The last token generated is never evaluated, so the sequence may reach nCtx + 1.
      const room = nCtx + 1 - prompt.length;
      const limit = Math.min(maxTokens, room);
      const ids = [];
      let stop = limit < maxTokens ? "context" : "max_tokens";
      for await (const token of sequence.evaluate(prompt, { temperature: 0, yieldEogToken: true })) {
        ids.push(token);
        if (m.model.isEogToken(token)) { stop = "eog"; break; }
        if (ids.length >= limit) break;
      }
      generated.push(ids);
      stops.push(stop);
    }
    return { generated, stop: stops };
  } finally {
    await context.dispose();
  }
}

async function cmdBench(m, opts) {
  const n = intOpt(opts, "prompt_tokens", undefined, 2);
  const g = intOpt(opts, "gen_tokens", undefined, 1);
  if (n === undefined || g === undefined) throw new UsageError("bench needs --prompt-tokens N (>= 2) and --gen-tokens M");
  const reps = intOpt(opts, "reps", 1, 1);
  const nCtx = m.model.trainContextSize;
  if (n + g > nCtx) throw new UsageError(`--prompt-tokens + --gen-tokens = ${n + g} > n_ctx_train = ${nCtx}`);
  const nVocab = await vocabSize(m);
  const prompt = Array.from({ length: n }, (_, i) => 1 + (i % Math.max(1, nVocab - 1)));
  const { context, sequence } = await newContext(m, nCtx, n);
  const threadsUsed = context.currentThreads;
  const best = { prompt_s: Infinity, prompt_logits_s: Infinity, gen_s: Infinity };
  try {
    for (let r = 0; r <= reps; r++) {  // r = 0: warm-up, not counted
      await sequence.clearHistory();
      let t0 = performance.now();
      await sequence.evaluateWithoutGeneratingNewTokens(prompt);
      const promptS = (performance.now() - t0) / 1000;

      await sequence.clearHistory();
      t0 = performance.now();
      const it = sequence.evaluate(prompt, { temperature: 0, yieldEogToken: true });
      await it.next();
      const promptLogitsS = (performance.now() - t0) / 1000;
      await it.return();

      await sequence.clearHistory();
      await sequence.evaluateWithoutGeneratingNewTokens(prompt.slice(0, n - 1));
      let count = 0;
      t0 = performance.now();
      for await (const _ of sequence.evaluate(prompt.slice(n - 1), { temperature: 0, yieldEogToken: true })) {
        if (++count >= g) break;
      }
      const genS = (performance.now() - t0) / 1000;
      if (r === 0) continue;
      best.prompt_s = Math.min(best.prompt_s, promptS);
      best.prompt_logits_s = Math.min(best.prompt_logits_s, promptLogitsS);
      best.gen_s = Math.min(best.gen_s, genS);
    }
  } finally {
    await context.dispose();
  }
  return {
    prompt_tokens: n,
    gen_tokens: g,
    threads: threadsUsed,
    reps,
    prompt_s: best.prompt_s,
    prompt_tok_per_s: n / best.prompt_s,
    prompt_logits_s: best.prompt_logits_s,
    prompt_logits_tok_per_s: n / best.prompt_logits_s,
    gen_s: best.gen_s,
    gen_tok_per_s: g / best.gen_s,
  };
}

function cmdCheck(m) {
  return {
    node_llama_cpp: m.version,
    llama_cpp: m.llama.llamaCppRelease,
    build: m.llama.buildType,
    gpu: m.llama.gpu,
    cpu_math_cores: m.llama.cpuMathCores,
  };
}

const COMMANDS = {
  check: cmdCheck, info: cmdInfo, tokenize: cmdTokenize, detokenize: cmdDetokenize,
  logprobs: cmdLogprobs, generate: cmdGenerate, bench: cmdBench,
};

async function main() {
  let opts;
  try {
    opts = parseArgs(process.argv.slice(2));
  } catch (e) {
    process.stderr.write(`llama_ref: ${e.message}\n`);
    return 2;
  }
  const cmd = opts._[0];
  if (!cmd || !COMMANDS[cmd] || opts._.length > 1) {
    process.stderr.write(`usage: node llama_ref.mjs {${Object.keys(COMMANDS).join("|")}} --model FILE.gguf [options]\n`);
    return 2;
  }
  let m;
  try {
    m = await openModel(opts, cmd !== "check");
    const result = await COMMANDS[cmd](m, opts);
    process.stdout.write(JSON.stringify(result) + "\n");
    return 0;
  } catch (e) {
    process.stderr.write(`llama_ref ${cmd}: ${e instanceof UsageError ? "" : "error: "}${e.message}\n`);
    return e instanceof UsageError ? 2 : 1;
  } finally {
    try { await m?.model?.dispose(); await m?.llama?.dispose(); } catch { /* exiting anyway */ }
  }
}

process.exitCode = await main();
