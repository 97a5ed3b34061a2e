#!/usr/bin/env bash
# The packages as a user meets them: cpack on the build folder of $ATTO (into a scratch folder:
# nothing is written into the source tree) makes the .deb and the .tar.gz; the .deb's control
# fields (name, the project's version, Depends from dpkg-shlibdeps naming the libraries atto
# loads) and contents; the .deb extracted (dpkg-deb -x) into an empty root, its atto run there
# (--version, a tiny train and sample, as the build's atto samples), examples/ built against that
# root only (find_package(atto) and pkg-config) and run; the .tar.gz extracted elsewhere and
# moved (relocatable), its atto and examples the same. Exit 77 (skipped) under AddressSanitizer.
# Usage: test_package.sh PATH/TO/atto   (the atto of a configured and built build folder)
set -u
ATTO=${1:?usage: test_package.sh path/to/atto}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${ATTO_BUILD_DIR:-$(dirname "$ATTO")}" && pwd)
if grep -q '^ATTO_SANITIZE:BOOL=ON$' "$BUILD/CMakeCache.txt" 2>/dev/null; then
  echo "package: skipped (a sanitized build: its package would need the sanitizer runtime)"
  exit 77
fi
. "$(dirname "$0")/lib.sh"
export OMP_NUM_THREADS=1
V=$(sed -n 's/^project(atto VERSION \([0-9.]*\) .*/\1/p' "$SRC/CMakeLists.txt")
ARCH=$(dpkg --print-architecture 2>/dev/null)
[ -n "$V" ] && [ -n "$ARCH" ] && ok || bad "no project version ('$V') or dpkg architecture ('$ARCH')"

# ---- cpack ------------------------------------------------------------------------------------------
touch "$W/before"
out=$(cpack --config "$BUILD/CPackConfig.cmake" -G "DEB;TGZ" -B "$W/pkg" 2>&1) && ok || bad "cpack failed: $out"
DEB=$W/pkg/atto_${V}_$ARCH.deb
TGZ=$W/pkg/atto-$V-Linux-$(uname -m).tar.gz
[ -f "$DEB" ] && [ -f "$TGZ" ] && ok || bad "cpack made $(ls "$W/pkg" | tr '\n' ' '), not $(basename "$DEB") and $(basename "$TGZ")"
left=$(find "$SRC" "$BUILD" -maxdepth 1 -newer "$W/before" \( -name _CPack_Packages -o -name 'atto[-_]*.deb' -o -name 'atto-*.tar.gz' \))
[ -z "$left" ] && ok || bad "cpack wrote outside its -B folder: $left"

# ---- the .deb's control fields -------------------------------------------------------------------------
field() { dpkg-deb -f "$DEB" "$1" 2>/dev/null; }
[ "$(field Package)" = atto ] && ok || bad "Package: '$(field Package)', not atto"
[ "$(field Version)" = "$V" ] && ok || bad "Version: '$(field Version)', not the project's $V"
[ "$(field Architecture)" = "$ARCH" ] && ok || bad "Architecture: '$(field Architecture)', not $ARCH"
[ -n "$(field Maintainer)" ] && [ -n "$(field Section)" ] && grep -q transformer <<<"$(field Description)" && ok ||
  bad "no Maintainer, Section or Description: $(dpkg-deb -I "$DEB" 2>&1 | head -20)"
depends=$(field Depends)
# What atto and libatto.so load, by package: each must be named (dpkg-shlibdeps' doing).
names=" $(tr ',|' '\n\n' <<<"$depends" | sed 's/(.*//; s/ //g' | tr '\n' ' ')"
for lib in libc6 libstdc++6 libgcc-s1 libgomp1 libopenblas libfmt libsentencepiece libpcre2-8 libcpp-httplib; do
  [[ $names == *" $lib"* ]] && ok || bad "Depends lacks $lib: $depends"
done
grep -q '^libatto 0 atto' <(dpkg-deb -I "$DEB" shlibs 2>&1) && ok ||
  bad "no shlibs entry for libatto.so.0: $(dpkg-deb -I "$DEB" shlibs 2>&1)"

# ---- the .deb's contents, extracted into an empty root ---------------------------------------------------
ROOT=$W/root
mkdir -p "$ROOT" && dpkg-deb -x "$DEB" "$ROOT" && ok || bad "dpkg-deb -x failed"
[ "$(ls "$ROOT")" = usr ] && ok || bad "the .deb installs outside /usr: $(ls "$ROOT" | tr '\n' ' ')"
LIBDIR=$(cd "$ROOT/usr" && dirname "$(find lib* -name libatto.so.0 2>/dev/null | head -1)")
# The files of one installed tree (the .deb's /usr, the archive's folder), what atto.pc says of it.
check_tree() {  # what, prefix
  local what=$1 p=$2 f
  for f in bin/atto include/atto/atto.h include/atto/atto.hpp "$LIBDIR/libatto.a" "$LIBDIR/libatto.so" \
           "$LIBDIR/libatto.so.$V" "$LIBDIR/cmake/atto/attoConfig.cmake" "$LIBDIR/cmake/atto/attoConfigVersion.cmake" \
           "$LIBDIR/cmake/atto/attoTargets.cmake" "$LIBDIR/pkgconfig/atto.pc"; do
    [ -e "$p/$f" ] && ok || bad "$what lacks $f: $(cd "$p" && find . -type f -o -type l | sort | tr '\n' ' ')"
  done
  # Nothing in it names the build or source folder, or a prefix other than its own.
  local named
  named=$(grep -rlF -e "$BUILD" -e "$SRC" -e /usr/local "$p/$LIBDIR/cmake" "$p/$LIBDIR/pkgconfig" 2>/dev/null)
  [ -z "$named" ] && ok || bad "$what: $named name the build tree, the sources or /usr/local"
  local pc=(env PKG_CONFIG_PATH="$p/$LIBDIR/pkgconfig" pkg-config)
  [ "$(realpath -m "$("${pc[@]}" --variable=prefix atto)")" = "$(realpath "$p")" ] && ok ||
    bad "$what: atto.pc says prefix=$("${pc[@]}" --variable=prefix atto 2>&1), it lies in $p"
  [ "$(realpath -m "$("${pc[@]}" --variable=libdir atto)")" = "$(realpath "$p/$LIBDIR")" ] && ok ||
    bad "$what: atto.pc says libdir=$("${pc[@]}" --variable=libdir atto 2>&1), not $p/$LIBDIR"
  [ "$("${pc[@]}" --modversion atto 2>&1)" = "$V" ] && ok || bad "$what: atto.pc's version is not $V"
}
[ -n "$LIBDIR" ] && ok || bad "no libatto.so.0 under usr/lib in the .deb"
check_tree ".deb" "$ROOT/usr"
[ "$(readlink "$ROOT/usr/$LIBDIR/libatto.so")" = libatto.so.0 ] && ok || bad "libatto.so is not a link to libatto.so.0"

# ---- the packaged atto: --version, a tiny run, samples ----------------------------------------------------
PATTO=$ROOT/usr/bin/atto
ldd "$PATTO" 2>&1 | grep -qE 'not found|libatto' && bad "the packaged atto needs libatto.so or misses a library: $(ldd "$PATTO" 2>&1 | grep -E 'not found|libatto')" || ok
[ "$("$PATTO" --version 2>&1 | head -1)" = "atto $V" ] && ok || bad "packaged atto --version: $("$PATTO" --version 2>&1)"
write_names 200 >"$W/names.txt"
"$PATTO" train --data "$W/names.txt" --out "$W/run" --steps 20 --d-model 16 --n-heads 2 --n-layers 1 --threads 1 \
  --eval-every 20 -q >/dev/null 2>"$W/stderr" && ok || bad "packaged atto train failed: $(tail -3 "$W/stderr")"
want=$("$ATTO" sample --model "$W/run" -n 5 --seed 7 --prompt ma 2>&1)
got=$("$PATTO" sample --model "$W/run" -n 5 --seed 7 --prompt ma 2>&1)
[ -n "$want" ] && [ "$got" = "$want" ] && ok || bad "packaged atto sample: '$got', the build's atto: '$want'"

# ---- examples/ against an installed tree only -------------------------------------------------------------
# CMake (find_package(atto) from CMAKE_PREFIX_PATH), then the C sampler through pkg-config; each run
# with the tree's library folder on LD_LIBRARY_PATH and compared with atto sample.
check_examples() {  # what, prefix, build folder
  local what=$1 p=$2 ex=$3 out got
  local run=(env LD_LIBRARY_PATH="$p/$LIBDIR")
  out=$(cmake -S "$SRC/examples" -B "$ex" -DCMAKE_PREFIX_PATH="$p" -DCMAKE_BUILD_TYPE=Release 2>&1 &&
        cmake --build "$ex" -j 2 --target sample sample_static 2>&1) && ok ||
    bad "$what: examples/ does not build against it: $out"
  [ "$(sed -n 's/^atto_DIR:PATH=//p' "$ex/CMakeCache.txt" 2>/dev/null)" = "$p/$LIBDIR/cmake/atto" ] && ok ||
    bad "$what: find_package(atto) found '$(sed -n 's/^atto_DIR:PATH=//p' "$ex/CMakeCache.txt" 2>/dev/null)'"
  grep -qF -e "$SRC/include" -e "$BUILD/" "$ex"/CMakeFiles/*.dir/{flags.make,link.txt} 2>/dev/null &&
    bad "$what: examples/ compile or link with atto's source or build tree" || ok
  "${run[@]}" ldd "$ex/sample" 2>/dev/null | grep -q "libatto.so.0 => $p/$LIBDIR/libatto.so.0" && ok ||
    bad "$what: sample does not load $p/$LIBDIR/libatto.so.0: $("${run[@]}" ldd "$ex/sample" 2>&1 | grep atto)"
  for prog in sample sample_static; do
    got=$("${run[@]}" "$ex/$prog" "$W/run" 5 7 ma 2>/dev/null)
    [ "$got" = "$want" ] && ok || bad "$what: examples' $prog prints '$got', atto sample '$want'"
  done
  local pc=(env PKG_CONFIG_PATH="$p/$LIBDIR/pkgconfig" pkg-config)
  out=$(cc -std=c11 -Wall -Werror -o "$ex/pc_sample" "$SRC/examples/c/sample.c" $("${pc[@]}" --cflags --libs atto) 2>&1) &&
    ok || bad "$what: cc with pkg-config --cflags --libs atto failed: $out"
  got=$("${run[@]}" "$ex/pc_sample" "$W/run" 5 7 ma 2>/dev/null)
  [ "$got" = "$want" ] && ok || bad "$what: the pkg-config sampler prints '$got', atto sample '$want'"
}
check_examples ".deb" "$ROOT/usr" "$W/ex-deb"
out=$(cmake --build "$W/ex-deb" -j 2 --target train_and_generate 2>&1) && ok || bad "train_and_generate does not build: $out"
got=$(LD_LIBRARY_PATH="$ROOT/usr/$LIBDIR" "$W/ex-deb/train_and_generate" score "$W/run" mari jo 2>&1)
grep -c 'total -log p' <<<"$got" | grep -qx 2 && ok || bad "train_and_generate score against the .deb: $got"

# ---- the .tar.gz, extracted elsewhere and moved: it holds the same tree, with no prefix -------------------
mkdir -p "$W/elsewhere" && tar -xzf "$TGZ" -C "$W/elsewhere" && ok || bad "tar -xzf $(basename "$TGZ") failed"
top=$(ls "$W/elsewhere")
[ "$top" = "atto-$V-Linux-$(uname -m)" ] && ok || bad "the archive's top folder is '$top'"
mv "$W/elsewhere/$top" "$W/moved" 2>/dev/null && ok || bad "no folder $top in the archive"
check_tree ".tar.gz" "$W/moved"
[ "$("$W/moved/bin/atto" --version 2>&1 | head -1)" = "atto $V" ] && ok || bad "the archive's atto --version: $("$W/moved/bin/atto" --version 2>&1)"
diff <(cd "$ROOT/usr" && find . | sort) <(cd "$W/moved" && find . | sort) >/dev/null && ok ||
  bad "the archive and the .deb hold different files: $(diff <(cd "$ROOT/usr" && find . | sort) <(cd "$W/moved" && find . | sort) | head -5)"
check_examples ".tar.gz" "$W/moved" "$W/ex-tgz"

finish package
