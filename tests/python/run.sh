#!/usr/bin/env bash
# ctest python.package: the atto Python package (python/) installed into a virtual environment
# against this build folder's libatto.so (scripts/python-env: no second build of atto), then its
# pytest tests (tests/python), which compare it with this build's atto program.
# Usage: run.sh PATH/TO/atto BUILD_DIR
# Exit 77 (skipped): a cross build (the host's Python cannot load an aarch64 libatto.so); an
# AddressSanitizer build unless ATTO_PYTHON_ASAN=1 (then Python runs with the sanitizer runtime
# preloaded, as tests/cli/test_library.sh runs its ctypes example).
set -euo pipefail
ATTO=${1:?usage: run.sh path/to/atto BUILD_DIR}
BUILD=${2:?usage: run.sh path/to/atto BUILD_DIR}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
if [ -e "$BUILD/atto-emulated" ]; then
  echo "python.package: skipped (a cross build: $BUILD/libatto.so is not for this machine)"
  exit 77
fi
env=(ATTO_CLI="$ATTO" OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}" PYTHONDONTWRITEBYTECODE=1)
# Under AddressSanitizer libatto.so carries the sanitizer runtime: Python gets it preloaded (it
# must come first in the process), and Python's own allocations are not checked for leaks.
# (ldd's whole output is read first: `ldd | grep -q` under pipefail fails when grep exits before
# ldd has written everything, and the test then ran under ASan without the runtime preloaded.)
libs=$(ldd "$BUILD/libatto.so" 2>/dev/null || true)
if [[ $libs == *libasan* ]]; then
  if [ "${ATTO_PYTHON_ASAN:-0}" != 1 ]; then
    echo "python.package: skipped in an AddressSanitizer build (ATTO_PYTHON_ASAN=1 runs it)"
    exit 77
  fi
  env+=(LD_PRELOAD="$(cc -print-file-name=libasan.so) $(cc -print-file-name=libubsan.so)"
        ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" ATTO_ASAN=1)
fi
t0=${EPOCHREALTIME/./}
PY=$("$SRC/scripts/python-env" "$BUILD" | tail -1)
echo "python.package: $PY ready in $(((${EPOCHREALTIME/./} - t0) / 1000)) ms"
cd "$SRC/tests/python"
exec env "${env[@]}" "$PY" -m pytest -q -p no:cacheprovider --durations=5 .
