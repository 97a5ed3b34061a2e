#!/usr/bin/env bash
# atto against PyTorch, side by side (see bench/e2e/README.md).
#
#   bench/e2e/run.sh                       # full run: 4 training and 2 generation configurations
#   bench/e2e/run.sh --smoke               # a few steps of everything (CI; timings meaningless)
#   bench/e2e/run.sh --atto build-x/atto --configs d --rounds 3 --json-out d.json
#
# The atto binary: --atto PATH, else $ATTO_BIN, else build/atto. Python: $ATTO_PYTHON, else
# Debian's /usr/bin/python3 (python3-torch 1.13). Exits 77 (skipped) when that python has no torch.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../.."
py="${ATTO_PYTHON:-/usr/bin/python3}"
if ! "$py" -c 'import torch' >/dev/null 2>&1; then
  echo "bench/e2e/run.sh: $py cannot import torch (install Debian's python3-torch); skipped" >&2
  exit 77
fi
exec "$py" "$here/run.py" --python "$py" "$@"
