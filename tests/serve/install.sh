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

# Imports the client exactly as openai_client.mjs does and prints its version.
check() { node "$here/openai_client.mjs" version --modules "$1"; }

source "$here/../npm_pinned.sh"
npm_pinned_install "$here" "$target" .atto-serve-client.stamp check openai/package.json
