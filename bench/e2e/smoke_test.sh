#!/usr/bin/env bash
# ctest bench.smoke: runs `run.sh --smoke` and passes when it exits 0 and printed both tables with
# every configuration. It never looks at a timing. Exit 77 (skipped) is passed on (no torch).
#   bench/e2e/smoke_test.sh path/to/atto
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$(bash "$here/run.sh" --smoke --atto "$1")"
rc=$?
printf '%s\n' "$out"
[ "$rc" -eq 0 ] || exit "$rc"
for pattern in '^== training' '^(a) ' '^(b) ' '^== generation' '^(c) .*MiB.*MiB.*MiB' '^(d) .*MiB.*MiB.*MiB'; do
  if ! grep -q -- "$pattern" <<<"$out"; then
    echo "bench.smoke: the output has no line matching '$pattern'" >&2
    exit 1
  fi
done
echo "bench.smoke: the tables were printed"
