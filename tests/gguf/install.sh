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

die() { echo "install.sh: $*" >&2; exit 1; }

command -v node >/dev/null || die "node is not installed (node >= 20 is needed)"
command -v npm >/dev/null || die "npm is not installed"
node_major="$(node -p 'process.versions.node.split(".")[0]')"
(( node_major >= 20 )) || die "node $(node --version) is too old: node-llama-cpp needs node >= 20"
[[ "$(uname -s)-$(uname -m)" == "Linux-x86_64" ]] \
  || die "only linux x86_64 is supported (the prebuilt package installed is @node-llama-cpp/linux-x64), not $(uname -s)-$(uname -m)"

export NODE_LLAMA_CPP_SKIP_DOWNLOAD=true   # never fetch llama.cpp's source
export NODE_LLAMA_CPP_POSTINSTALL=skip     # and never build it (the postinstall is not run anyway)
export NODE_LLAMA_CPP_GPU=false

mkdir -p "$target"
target="$(cd "$target" && pwd)"
stamp="$target/node_modules/.atto-gguf-ref.stamp"
want="$(cat "$here/package.json" "$here/package-lock.json" | sha256sum | cut -d' ' -f1)"

# Loads llama.cpp exactly as llama_ref.mjs does (prebuilt only) and prints what it found. (A
# script file, not `node -e`: node-llama-cpp tests its binary in a child process that re-runs
# the parent's command line.)
check() {
  node "$here/llama_ref.mjs" check --modules "$target/node_modules"
}

if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  if out="$(check 2>&1)"; then
    echo "install.sh: already installed in $target/node_modules: $out"
    exit 0
  fi
  echo "install.sh: the install in $target/node_modules does not load ($out); reinstalling" >&2
fi

cp "$here/package.json" "$here/package-lock.json" "$target/"
start=$(date +%s.%N)
(cd "$target" && npm install --no-audit --no-fund --omit=optional --ignore-scripts --no-save --loglevel=error) \
  || die "npm install failed in $target"
end=$(date +%s.%N)

[[ -d "$target/node_modules/@node-llama-cpp/linux-x64/bins" ]] \
  || die "@node-llama-cpp/linux-x64 was not installed (its binaries are what llama_ref.mjs loads)"
out="$(check 2>&1)" || die "llama.cpp does not load from $target/node_modules: $out"
echo "$want" > "$stamp"
size="$(du -sh "$target/node_modules" | cut -f1)"
printf 'install.sh: installed in %s/node_modules in %.1f s (%s): %s\n' "$target" "$(echo "$end - $start" | bc)" "$size" "$out"
