#!/usr/bin/env bash
# tests/gguf/install.sh DIR: installs the reference client's npm packages (tests/gguf/package.json
# and package-lock.json: node-llama-cpp and its prebuilt linux-x64 CPU llama.cpp libraries) into
# DIR/node_modules, e.g. `tests/gguf/install.sh build/node`. Then
#   node tests/gguf/llama_ref.mjs info --modules build/node/node_modules --model m.gguf
#
# - Idempotent: does nothing (but the check below) when DIR already holds exactly these
#   package files' install (a stamp with their hash).
# - Never builds llama.cpp from source and never downloads it: install scripts are not run
#   (node-llama-cpp's postinstall would fall back to a source build when its prebuilt binaries
#   do not load), NODE_LLAMA_CPP_SKIP_DOWNLOAD / NODE_LLAMA_CPP_POSTINSTALL say the same, and
#   the check loads llama.cpp with getLlama({build: "never"}) and requires a prebuilt binary.
# - Optional dependencies are omitted: node-llama-cpp lists every platform's binaries (CUDA,
#   Vulkan, macOS, Windows...) as optional; the one used here, @node-llama-cpp/linux-x64 (CPU
#   backends only), is a direct dependency in package.json so that --omit=optional keeps it.
# - Needs node >= 20 and npm (from the npm registry, or its cache); linux x64 with glibc only.
# Exit status: 0 installed (or already), 1 on any failure, 2 on usage.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [[ $# -ne 1 || -z "$1" ]]; then
  echo "usage: $0 TARGET_DIR   (e.g. build/node; node_modules is created inside it)" >&2
  exit 2
fi
target="$1"
[[ "$(uname -s)-$(uname -m)" == "Linux-x86_64" ]] ||
  { echo "install.sh: only linux x86_64 is supported (the prebuilt package installed is @node-llama-cpp/linux-x64), not $(uname -s)-$(uname -m)" >&2; exit 1; }

export NODE_LLAMA_CPP_SKIP_DOWNLOAD=true   # never fetch llama.cpp's source
export NODE_LLAMA_CPP_POSTINSTALL=skip     # and never build it (the postinstall is not run anyway)
export NODE_LLAMA_CPP_GPU=false

# Loads llama.cpp exactly as llama_ref.mjs does (prebuilt only) and prints what it found. (A
# script file, not `node -e`: node-llama-cpp tests its binary in a child process that re-runs
# the parent's command line.)
check() { node "$here/llama_ref.mjs" check --modules "$1"; }

source "$here/../npm_pinned.sh"
npm_pinned_install "$here" "$target" .atto-gguf-ref.stamp check @node-llama-cpp/linux-x64/bins
