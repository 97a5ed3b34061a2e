#!/usr/bin/env bash
# Browser test of `atto inspect`: trains a tiny run, writes reports, opens them in headless
# Chromium (network blocked) and checks that
#   - the page's own self-check passed (the embedded JSON parses; one attention map per layer
#     and head is on the page),
#   - the DOM holds exactly one attention heatmap per (layer, head), with the expected size,
#   - the browser logged no console message at all (no script error, no failed load),
#   - the page is self-contained (no URL but the SVG namespace) and every SVG file is
#     well-formed XML,
#   - a screenshot was taken (kept in SCREENSHOT_DIR for people to look at).
# Usage: test_browser.sh path/to/atto [SCREENSHOT_DIR]
# Without a Chromium binary (chromium, chromium-browser, or $ATTO_CHROMIUM) the test fails,
# unless ATTO_ALLOW_NO_BROWSER=1, when it exits 77 (ctest: skipped).
set -u
ATTO=${1:?usage: test_browser.sh path/to/atto [screenshot-dir]}
SHOTS=${2:-}
W=$(mktemp -d /tmp/atto-viz-browser.XXXXXX)
trap 'rm -rf "$W"' EXIT
fail=0
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

CHROME=${ATTO_CHROMIUM:-}
if [ -z "$CHROME" ]; then
  for c in chromium chromium-browser; do command -v "$c" >/dev/null 2>&1 && CHROME=$c && break; done
fi
if [ -z "$CHROME" ]; then
  if [ "${ATTO_ALLOW_NO_BROWSER:-0}" = 1 ]; then
    echo "SKIP: no chromium found (ATTO_ALLOW_NO_BROWSER=1)"
    exit 77
  fi
  echo "FAIL: no chromium found: install it (scripts/setup installs Debian's chromium) or set ATTO_ALLOW_NO_BROWSER=1"
  exit 1
fi

# chrome_run OUT_PREFIX URL [extra flags...]: stdout -> OUT_PREFIX.out, stderr -> OUT_PREFIX.err
chrome_run() {
  local out=$1 url=$2
  shift 2
  timeout 120 "$CHROME" --headless --no-sandbox --disable-gpu --disable-background-networking \
    --disable-component-update --disable-sync --no-first-run --user-data-dir="$W/profile" \
    --host-resolver-rules="MAP * ~NOTFOUND" --enable-logging=stderr --v=0 "$@" "$url" \
    >"$out.out" 2>"$out.err"
}

# ---- a tiny run ---------------------------------------------------------------------------------
for n in emma olivia ava isabella sophia mia charlotte amelia harper evelyn abigail emily ella \
  elizabeth camila luna sofia avery mila aria scarlett penelope layla chloe victoria madison; do
  echo "$n"
done >"$W/names.txt"
if ! "$ATTO" train --data "$W/names.txt" --out "$W/run" --n-layers 2 --n-heads 2 --d-model 16 --block-size 16 \
  --steps 20 --batch-size 8 --eval-every 10 --log-every 5 -q >"$W/train.log" 2>&1; then
  cat "$W/train.log"
  echo "FAIL: atto train"
  exit 1
fi

# check_report DIR LAYERS HEADS ROWS: open DIR/index.html and check it.
check_report() {
  local dir=$1 layers=$2 heads=$3 rows=$4 want=$(($2 * $3))
  local url="file://$dir/index.html"
  chrome_run "$dir/dom" "$url" --dump-dom
  local dom="$dir/dom.out"
  [ -s "$dom" ] || { bad "$dir: chromium dumped no DOM: $(tail -3 "$dir/dom.err")"; return; }
  grep -q 'id="atto-check" data-status="ok"' "$dom" ||
    bad "$dir: the page's self-check did not pass: $(grep -o '<span id="atto-check"[^<]*' "$dom")"
  local maps
  maps=$(grep -o '<svg [^>]*class="atto-attn"[^>]*>' "$dom" | wc -l)
  [ "$maps" -eq "$want" ] || bad "$dir: $maps attention heatmaps in the DOM, want $want ($layers layers x $heads heads)"
  local pairs
  pairs=$(grep -o 'class="atto-attn" data-layer="[0-9]*" data-head="[0-9]*"' "$dom" | sort -u | wc -l)
  [ "$pairs" -eq "$want" ] || bad "$dir: $pairs distinct (layer, head) maps, want $want"
  local sized
  sized=$(grep -o "class=\"atto-attn\" data-layer=\"[0-9]*\" data-head=\"[0-9]*\" data-rows=\"$rows\" data-cols=\"$rows\"" "$dom" | wc -l)
  [ "$sized" -eq "$want" ] || bad "$dir: $sized maps of $rows x $rows tokens, want $want"
  if grep -q ':CONSOLE' "$dir/dom.err"; then bad "$dir: console messages: $(grep ':CONSOLE' "$dir/dom.err")"; fi
  # Self-contained: the only URL in the page is the SVG namespace.
  local urls
  urls=$(grep -o 'https\?://[^"'"'"' )<]*' "$dir/index.html" | grep -v '^http://www.w3.org/2000/svg$' | sort -u)
  [ -z "$urls" ] || bad "$dir: the page refers to URLs: $urls"
  grep -qE '<script[^>]* src=|<link |@import|@font-face' "$dir/index.html" && bad "$dir: external script, style or font"
  # Every SVG file stands alone as well-formed XML with an <svg> root.
  if [ -x /usr/bin/python3 ]; then
    /usr/bin/python3 - "$dir"/*.svg <<'EOF' || bad "$dir: an SVG file is not well-formed"
import sys, xml.etree.ElementTree as ET
for f in sys.argv[1:]:
    root = ET.parse(f).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg", (f, root.tag)
EOF
  fi
  local n_svg
  n_svg=$(ls "$dir"/attn_L*_H*.svg 2>/dev/null | wc -l)
  [ "$n_svg" -eq "$want" ] || bad "$dir: $n_svg attention SVG files, want $want"
}

# ---- report 1: a name, sampler steps on -----------------------------------------------------------
R1="$W/report"
if ! "$ATTO" inspect --model "$W/run" --text emma --out "$R1" --temperature 0.8 --top-k 5 --top-p 0.9 >"$W/i1.log" 2>&1; then
  bad "atto inspect: $(cat "$W/i1.log")"
else
  check_report "$R1" 2 2 5
  for f in next_token residual embeddings_pca positions position_similarity loss lr; do
    [ -s "$R1/$f.svg" ] || bad "report figure $f.svg missing"
  done
  # The screenshot: a tall window, so that most of the page is in it.
  chrome_run "$W/shot" "file://$R1/index.html" --window-size=1280,2400 --hide-scrollbars --screenshot="$W/report.png"
  if [ ! -s "$W/report.png" ] || [ "$(head -c 8 "$W/report.png" | od -An -tx1 | tr -d ' \n')" != "89504e470d0a1a0a" ]; then
    bad "no screenshot: $(tail -3 "$W/shot.err")"
  elif [ "$(stat -c %s "$W/report.png")" -lt 30000 ]; then
    bad "the screenshot is suspiciously small ($(stat -c %s "$W/report.png") bytes): a blank page?"
  fi
  grep -q ':CONSOLE' "$W/shot.err" && bad "console messages while taking the screenshot: $(grep ':CONSOLE' "$W/shot.err")"
  if [ -n "$SHOTS" ] && [ -s "$W/report.png" ]; then
    mkdir -p "$SHOTS" && cp "$W/report.png" "$SHOTS/inspect-report.png" && echo "screenshot: $SHOTS/inspect-report.png"
  fi
fi

# ---- report 2: text longer than the block size, capped attention maps ----------------------------
R2="$W/report-long"
if ! "$ATTO" inspect --model "$W/run" --text "isabellasophiaoliviacharlotte" --max-attention-tokens 8 --out "$R2" \
  >"$W/i2.log" 2>&1; then
  bad "atto inspect (long text): $(cat "$W/i2.log")"
else
  grep -q "tokens were dropped" "$W/i2.log" || bad "no note about the dropped tokens: $(cat "$W/i2.log")"
  check_report "$R2" 2 2 8
fi

# ---- report 3: an empty text (the model sees <eos> alone) -------------------------------------------
R3="$W/report-empty"
if ! "$ATTO" inspect --model "$W/run" --text "" --out "$R3" >"$W/i3.log" 2>&1; then
  bad "atto inspect (empty text): $(cat "$W/i3.log")"
else
  check_report "$R3" 2 2 1
fi

# ---- bad input --------------------------------------------------------------------------------------
if "$ATTO" inspect --model "$W/run" --text "emma" --out "$W/run" >/dev/null 2>"$W/bad.log"; then
  bad "inspect wrote into the run directory"
else
  grep -q "atto: error: .*run directory" "$W/bad.log" || bad "message for --out = run dir: $(cat "$W/bad.log")"
fi
if "$ATTO" inspect --model "$W/run" --text "emma" --out "$W/x" --top-p 0 >/dev/null 2>"$W/bad.log"; then
  bad "--top-p 0 accepted"
else
  grep -q -- "--top-p" "$W/bad.log" || bad "message for --top-p 0: $(cat "$W/bad.log")"
fi

# ---- report 4: a seq2seq run (encoder, cross and decoder attention) -----------------------------------
for rep in 1 2 3; do
  printf 'a dog runs\na cat sleeps\nthe dog sleeps\nthe cat runs\n'
done >"$W/s2s.en"
for rep in 1 2 3; do
  printf 'ein hund laeuft\neine katze schlaeft\nder hund schlaeft\ndie katze laeuft\n'
done >"$W/s2s.de"
R4="$W/report4"
if ! "$ATTO" train --task seq2seq --src "$W/s2s.en" --tgt "$W/s2s.de" --tokenizer word --d-model 16 --n-heads 2 \
  --n-layers 2 --steps 60 --warmup 10 --lr 3e-3 --eval-every 30 --out "$W/s2s" -q >"$W/s2s.log" 2>&1; then
  bad "atto train --task seq2seq: $(cat "$W/s2s.log")"
elif ! "$ATTO" inspect --model "$W/s2s" --src "a dog runs" --out "$R4" >"$W/i4.log" 2>&1; then
  bad "atto inspect (seq2seq): $(cat "$W/i4.log")"
else
  chrome_run "$R4/dom" "file://$R4/index.html" --dump-dom
  dom="$R4/dom.out"
  grep -q 'id="atto-check" data-status="ok"' "$dom" ||
    bad "seq2seq: the page's self-check did not pass: $(grep -o '<span id="atto-check"[^<]*' "$dom")"
  for kind in encoder cross decoder; do  # 2 layers x 2 heads each, distinct (layer, head) pairs
    n=$(grep -o "class=\"atto-attn\" data-kind=\"$kind\" data-layer=\"[0-9]*\" data-head=\"[0-9]*\"" "$dom" | sort -u | wc -l)
    [ "$n" -eq 4 ] || bad "seq2seq: $n distinct $kind attention maps in the DOM, want 4"
  done
  grep -q 'id="atto-translation"' "$dom" || bad "seq2seq: no translation at the top of the page"
  grep -q ':CONSOLE' "$R4/dom.err" && bad "seq2seq: console messages: $(grep ':CONSOLE' "$R4/dom.err")"
fi
if "$ATTO" inspect --model "$W/s2s" --text "a dog" --out "$W/y" >/dev/null 2>"$W/bad.log"; then
  bad "--text accepted for a seq2seq run"
else
  grep -q -- "--src" "$W/bad.log" || bad "message for --text on a seq2seq run: $(cat "$W/bad.log")"
fi

if [ $fail -ne 0 ]; then
  echo "test_browser: $fail failure(s)"
  exit 1
fi
echo "test_browser: all checks passed"
