#!/usr/bin/env bash
# tests/serve/install.sh DIR: installs the official OpenAI Node client (npm's `openai`, pinned in
# tests/serve/package.json and package-lock.json) into DIR/node_modules, e.g.
# `tests/serve/install.sh build/node-serve`. Then
#   node tests/serve/openai_client.mjs models --modules build/node-serve/node_modules \
#        --base-url http://127.0.0.1:8080/v1 --api-key KEY
#
# - Idempotent: does nothing (but the check below) when DIR already holds exactly these
#   package files' install (a stamp with their hash).
# - The package has no dependencies of its own (its peer dependencies ws and zod are optional
#   and not installed: the client only needs them for the realtime API and zod helpers). Install
#   scripts are not run, optional dependencies are omitted, nothing is installed globally.
# - Needs node >= 20 and npm (from the npm registry, or its cache).
# Exit status: 0 installed (or already), 1 on any failure, 2 on usage.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [[ $# -ne 1 || -z "$1" ]]; then
  echo "usage: $0 TARGET_DIR   (e.g. build/node-serve; node_modules is created inside it)" >&2
  exit 2
fi
target="$1"

die() { echo "install.sh: $*" >&2; exit 1; }

command -v node >/dev/null || die "node is not installed (node >= 20 is needed)"
command -v npm >/dev/null || die "npm is not installed"
node_major="$(node -p 'process.versions.node.split(".")[0]')"
(( node_major >= 20 )) || die "node $(node --version) is too old: node >= 20 is needed (global fetch, ReadableStream)"

mkdir -p "$target"
target="$(cd "$target" && pwd)"
stamp="$target/node_modules/.atto-serve-client.stamp"
want="$(cat "$here/package.json" "$here/package-lock.json" | sha256sum | cut -d' ' -f1)"

# Imports the client exactly as openai_client.mjs does and prints its version.
check() {
  node "$here/openai_client.mjs" version --modules "$target/node_modules"
}

if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  if out="$(check 2>&1)"; then
    echo "install.sh: already installed in $target/node_modules: $out"
    exit 0
  fi
  echo "install.sh: the install in $target/node_modules does not load ($out); reinstalling" >&2
  rm -rf "$target/node_modules/openai"   # npm would call a damaged package "up to date"
fi

cp "$here/package.json" "$here/package-lock.json" "$target/"
start=$(date +%s.%N)
(cd "$target" && npm install --no-audit --no-fund --omit=optional --ignore-scripts --no-save --loglevel=error) \
  || die "npm install failed in $target"
end=$(date +%s.%N)

[[ -f "$target/node_modules/openai/package.json" ]] || die "openai was not installed in $target/node_modules"
out="$(check 2>&1)" || die "the openai client does not load from $target/node_modules: $out"
echo "$want" > "$stamp"
size="$(du -sh "$target/node_modules" | cut -f1)"
printf 'install.sh: installed in %s/node_modules in %.1f s (%s): %s\n' "$target" "$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')" "$size" "$out"
