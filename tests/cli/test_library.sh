#!/usr/bin/env bash
# The installed library as a user meets it: `cmake --install` of the build folder of $ATTO into a
# scratch prefix (headers, libatto.so.0 with only atto_* exported, libatto.a, the CMake package,
# atto.pc), then examples/ built against that prefix only (find_package(atto), pkg-config, the
# static library, ctypes from Python), and their output compared with the atto command line:
# the C, static, pkg-config and Python samplers print what `atto sample` prints, the C++ example
# trains the run `atto train` trains with the same settings, samples as `atto sample` and scores
# as `atto score`.
# Usage: test_library.sh PATH/TO/atto   (the atto of a configured and built build folder)
set -u
ATTO=${1:?usage: test_library.sh path/to/atto}
. "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "$(dirname "$ATTO")" && pwd)
P=$W/prefix
export OMP_NUM_THREADS=1

# Under AddressSanitizer the library carries the sanitizer runtime: the examples are built with
# it too (it must come first in the process), and Python gets it preloaded.
SAN=()
PY_ENV=()
if [ "$ATTO_ASAN" = 1 ]; then
  SAN=(-fsanitize=address,undefined)
  PY_ENV=(LD_PRELOAD="$(cc -print-file-name=libasan.so) $(cc -print-file-name=libubsan.so)"
          ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0")  # Python's own allocations are not ours to check
fi

# ---- the installed tree ---------------------------------------------------------------------------
out=$(cmake --install "$BUILD" --prefix "$P" 2>&1) && ok || bad "cmake --install $BUILD failed: $out"
for f in include/atto/atto.h include/atto/atto.hpp lib/libatto.a lib/cmake/atto/attoConfig.cmake \
         lib/cmake/atto/attoConfigVersion.cmake lib/cmake/atto/attoTargets.cmake lib/pkgconfig/atto.pc; do
  [ -f "$P/$f" ] && ok || bad "not installed: $f"
done
[ "$(readlink "$P/lib/libatto.so")" = libatto.so.0 ] && [ "$(readlink "$P/lib/libatto.so.0")" = libatto.so.0.12.0 ] &&
  [ -f "$P/lib/libatto.so.0.12.0" ] && [ ! -L "$P/lib/libatto.so.0.12.0" ] && ok ||
  bad "not the chain libatto.so -> libatto.so.0 -> libatto.so.0.12.0: $(ls -l "$P"/lib/libatto.so* 2>&1)"
soname=$(objdump -p "$P/lib/libatto.so.0.12.0" 2>/dev/null | awk '$1 == "SONAME" {print $2}')
[ "$soname" = libatto.so.0 ] && ok || bad "SONAME is '$soname', not libatto.so.0"
# Exported: the C API and nothing else (the version node ATTO_0 is an absolute symbol).
exported=$(nm -D --defined-only "$P/lib/libatto.so" | awk '$2 != "A" {sub(/@.*/, "", $3); print $3}' | sort)
others=$(grep -v '^atto_' <<<"$exported")
[ -z "$others" ] && ok || bad "libatto.so exports more than atto_*: $(head -5 <<<"$others" | tr '\n' ' ')"
declared=$(grep -o 'ATTO_API [^(]*\batto_[a-z_]*(' "$P/include/atto/atto.h" | sed 's/.*\b\(atto_[a-z_]*\)($/\1/' | sort)
missing=$(comm -23 <(echo "$declared") <(echo "$exported"))
[ -n "$declared" ] && [ -z "$missing" ] && ok || bad "atto.h declares, libatto.so does not export: $missing"

# ---- examples/ with find_package(atto) only -------------------------------------------------------
WARN="-Wall -Wextra -Wpedantic -Werror ${SAN[*]}"
out=$(cmake -S "$SRC/examples" -B "$W/ex" -DCMAKE_PREFIX_PATH="$P" -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_C_FLAGS="$WARN" -DCMAKE_CXX_FLAGS="$WARN" 2>&1 && cmake --build "$W/ex" -j 2 2>&1) && ok ||
  bad "examples/ does not build against the installed atto: $out"
atto_dir=$(sed -n 's/^atto_DIR:PATH=//p' "$W/ex/CMakeCache.txt" 2>/dev/null)
[ "$atto_dir" = "$P/lib/cmake/atto" ] && ok || bad "find_package(atto) found '$atto_dir', not $P/lib/cmake/atto"
grep -qF -e "$SRC/include" -e "$BUILD/" "$W/ex"/CMakeFiles/*.dir/{flags.make,link.txt} 2>/dev/null &&
  bad "examples/ compile or link with atto's source or build tree" || ok

# ---- the same C program with pkg-config: shared, then static -----------------------------------------
# atto.pc finds its prefix from its own folder (${pcfiledir}): right wherever it is installed.
export PKG_CONFIG_PATH=$P/lib/pkgconfig
PKGC=(pkg-config)
[ "$(realpath "$(pkg-config --variable=prefix atto)")" = "$(realpath "$P")" ] && ok ||
  bad "atto.pc says prefix=$(pkg-config --variable=prefix atto), installed in $P"
[ "$("${PKGC[@]}" --modversion atto)" = 0.12.0 ] && ok || bad "pkg-config --modversion atto: $("${PKGC[@]}" --modversion atto 2>&1)"
out=$(cc -std=c11 $WARN -o "$W/pc_sample" "$SRC/examples/c/sample.c" $("${PKGC[@]}" --cflags --libs atto) \
        -Wl,-rpath,"$P/lib" 2>&1) && ok || bad "cc with pkg-config --cflags --libs atto failed: $out"
ldd "$W/pc_sample" 2>/dev/null | grep -q "libatto.so.0 => $P/lib/libatto.so.0" && ok ||
  bad "pc_sample does not load $P/lib/libatto.so.0: $(ldd "$W/pc_sample" 2>&1 | grep atto)"
libs=" $("${PKGC[@]}" --static --libs atto) "
out=$(cc -std=c11 $WARN -o "$W/st_sample" "$SRC/examples/c/sample.c" $("${PKGC[@]}" --cflags atto) \
        ${libs/ -latto / -l:libatto.a } 2>&1) && ok || bad "cc with libatto.a and pkg-config --static --libs failed: $out"
! ldd "$W/st_sample" 2>/dev/null | grep -q libatto && ok || bad "st_sample loads libatto.so: not a static link"
! ldd "$W/ex/sample_static" 2>/dev/null | grep -q libatto && ok || bad "atto::atto_static gave a shared link"

# ---- a tiny run, and every sampler against `atto sample` -------------------------------------------------
write_names 300 >"$W/names.txt"
TINY=(--steps 60 --d-model 32 --n-heads 2 --n-layers 1 --threads 1 --eval-every 30)
"$ATTO" train --data "$W/names.txt" --out "$W/run" "${TINY[@]}" -q >/dev/null && ok || bad "atto train failed"
"$ATTO" train --data "$W/names.txt" --out "$W/stream" --mode stream "${TINY[@]}" -q >/dev/null && ok ||
  bad "atto train --mode stream failed"
RUN=$W/run
same_samples() {  # what, n, seed, [prompt], then the command (RUN n seed [prompt] appended)
  local what=$1 n=$2 seed=$3 prompt=$4 want got
  shift 4
  local pa=() args=("$RUN" "$n" "$seed")
  [ -n "$prompt" ] && pa=(--prompt "$prompt") && args+=("$prompt")
  want=$("$ATTO" sample --model "$RUN" -n "$n" --seed "$seed" "${pa[@]}")
  if ! got=$("$@" "${args[@]}" 2>"$W/stderr"); then bad "$what ${args[*]} failed: $(tail -3 "$W/stderr")"; return; fi
  [ -n "$got" ] && [ "$got" = "$want" ] && ok ||
    bad "$what ${args[*]} prints $(head -3 <<<"$got" | tr '\n' '|')..., atto sample $(head -3 <<<"$want" | tr '\n' '|')..."
}
for ex in "C:$W/ex/sample" "static:$W/ex/sample_static" "pkg-config:$W/pc_sample" "pkg-config-static:$W/st_sample"; do
  same_samples "${ex%%:*}" 7 11 "" "${ex#*:}"
  same_samples "${ex%%:*}" 300 3 "ma" "${ex#*:}"  # more than one batch of 256
done
PY=(env ATTO_LIB="$P/lib/libatto.so" "${PY_ENV[@]}" python3 "$SRC/examples/python/sample.py")
same_samples python 7 11 "" "${PY[@]}"
same_samples python 20 3 "ma" "${PY[@]}"
[ "$(wc -l < <("$W/ex/sample" "$RUN" 300 3 2>/dev/null))" -eq 300 ] && ok || bad "not one line per sample in lines mode"
# Stream mode: a sample is text of any lines, then a line of dashes.
RUN=$W/stream
same_samples C 3 5 "" "$W/ex/sample"
same_samples python 3 5 "ma" "${PY[@]}"
RUN=$W/run
# The callback streamed each sample's text to stderr, piece by piece, tagged with its index.
got=$("$W/ex/sample" "$W/run" 40 11 ma 2>"$W/stderr")
streamed=$(awk '{ i = substr($1, 2, length($1) - 2) + 0; sub(/^\[[0-9]+\] /, ""); s[i] = s[i] $0 }
                END { for (i = 0; i < 40; i++) print "ma" s[i] }' "$W/stderr")
[ -n "$got" ] && [ "$streamed" = "$got" ] && ok || bad "the C example's streamed pieces do not add up to its samples"
expect_fail "is not a run directory" "$W/ex/sample" "$W/nosuch" 3 1
expect_fail "n_samples must be at least 1" "${PY[@]}" "$W/run" 0 1

# ---- C++: train (atto_train = atto train), sample, score -------------------------------------------------
out=$(cd "$W" && "$W/ex/train_and_generate" train "$W/names.txt" "$W/cpp" 2>&1) && ok ||
  bad "train_and_generate train failed: $out"
grep -q '^step 60/60  train loss [0-9.]*  val loss [0-9.]*$' <<<"$out" && ok ||
  bad "train_and_generate printed no progress of step 60: $(head -3 <<<"$out")"
cmp -s "$W/run/model.safetensors" "$W/cpp/model.safetensors" && ok ||
  bad "atto_train and atto train with the same settings give different weights"
[ "$(tail -10 <<<"$out")" = "$("$ATTO" sample --model "$W/cpp" -n 10 --seed 42)" ] && ok ||
  bad "train_and_generate's samples differ from atto sample's: $(tail -10 <<<"$out" | tr '\n' '|')"
texts=(mari jo ka tesa)
want=$("$ATTO" score --model "$W/run" "${texts[@]}" | grep -E '^[^ ]|^  total -log p' | grep -v '^all ')
got=$("$W/ex/train_and_generate" score "$W/run" "${texts[@]}" 2>&1)
[ "$got" = "$want" ] && [ "$(grep -c 'total -log p' <<<"$got")" -eq 4 ] && ok ||
  bad "train_and_generate score prints: $got; atto score: $want"
expect_fail "unknown character ' '" "$W/ex/train_and_generate" score "$W/run" "ma ri"

finish library
