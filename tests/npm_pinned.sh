# tests/npm_pinned.sh: installs a reference client's pinned npm packages (package.json and
# package-lock.json of its folder) into TARGET/node_modules, for tests/gguf/install.sh and
# tests/serve/install.sh (source it, then call npm_pinned_install).
#
#   npm_pinned_install HERE TARGET STAMP CHECK REQUIRED
#     HERE      the folder holding package.json and package-lock.json
#     TARGET    where node_modules goes (created)
#     STAMP     a file name under node_modules recording the hash of the two package files
#     CHECK     a command (a function name) that loads the client and prints what it found;
#               run with the node_modules path as its argument
#     REQUIRED  a path under node_modules that must exist after the install
#   Idempotent: nothing is installed when the stamp matches and CHECK passes. npm runs with
#   --omit=optional --ignore-scripts --no-save (no install scripts, nothing global); a damaged
#   install is removed first (npm would call it up to date). Needs node >= 20 and npm.
npm_pinned_die() { echo "install.sh: $*" >&2; exit 1; }

npm_pinned_install() {
  local here=$1 target=$2 stamp_name=$3 check=$4 required=$5 want out start end size
  command -v node >/dev/null || npm_pinned_die "node is not installed (node >= 20 is needed)"
  command -v npm >/dev/null || npm_pinned_die "npm is not installed"
  (( $(node -p 'process.versions.node.split(".")[0]') >= 20 )) ||
    npm_pinned_die "node $(node --version) is too old: node >= 20 is needed"
  mkdir -p "$target"
  target="$(cd "$target" && pwd)"
  want="$(cat "$here/package.json" "$here/package-lock.json" | sha256sum | cut -d' ' -f1)"
  if [[ -f "$target/node_modules/$stamp_name" && "$(cat "$target/node_modules/$stamp_name")" == "$want" ]]; then
    if out="$("$check" "$target/node_modules" 2>&1)"; then
      echo "install.sh: already installed in $target/node_modules: $out"
      return 0
    fi
    echo "install.sh: the install in $target/node_modules does not load ($out); reinstalling" >&2
    rm -rf "$target/node_modules"
  fi
  cp "$here/package.json" "$here/package-lock.json" "$target/"
  start=$(date +%s.%N)
  (cd "$target" && npm install --no-audit --no-fund --omit=optional --ignore-scripts --no-save --loglevel=error) ||
    npm_pinned_die "npm install failed in $target"
  end=$(date +%s.%N)
  [[ -e "$target/node_modules/$required" ]] || npm_pinned_die "$required was not installed in $target/node_modules"
  out="$("$check" "$target/node_modules" 2>&1)" || npm_pinned_die "the client does not load from $target/node_modules: $out"
  echo "$want" >"$target/node_modules/$stamp_name"
  size="$(du -sh "$target/node_modules" | cut -f1)"
  printf 'install.sh: installed in %s/node_modules in %.1f s (%s): %s\n' "$target" \
    "$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')" "$size" "$out"
}
