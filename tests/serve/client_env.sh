# Sourced by the atto serve tests (after tests/cli/lib.sh, with $ATTO and $SRC set): installs the
# official openai npm client into the build tree (tests/serve/install.sh) and points NODE_PATH at it.
BUILD=$(cd "$(dirname "$ATTO")" && pwd)
if ! out=$(bash "$SRC/tests/serve/install.sh" "$BUILD/node-openai" 2>&1); then
  echo "FAIL: installing the openai client (tests/serve/install.sh): $out"
  exit 1
fi
export NODE_PATH=$BUILD/node-openai/node_modules
