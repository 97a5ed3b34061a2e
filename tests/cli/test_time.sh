#!/usr/bin/env bash
# atto train --time: the run is planned from its own measured step time, ends near the budget
# with the LR decayed, records the plan in config.json, and a run rebuilt from that config
# (stopped halfway and resumed) gives the same weights bit for bit.
# Usage: test_time.sh PATH/TO/atto
set -u
ATTO=${1:?usage: test_time.sh path/to/atto}
. "$(dirname "$0")/lib.sh"
json_num() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['train'][sys.argv[2]])" "$1" "$2"; }

write_names >"$W/names.txt"

# ---- a 6-second budget ---------------------------------------------------------------------------
BUDGET=6
out=$("$ATTO" train --data "$W/names.txt" --out "$W/a" --time ${BUDGET}s --eval-every 100 2>&1)
[ $? -eq 0 ] && ok || bad "--time run failed: $out"
grep -q "^time budget 6.0s: size " <<<"$out" && ok || bad "no plan line in the header: $out"
line=$(grep "^time budget 6.0s: the run took" <<<"$out")
[ -n "$line" ] && ok || bad "no planned-vs-actual line: $out"
took=$(sed -E 's/.*the run took ([0-9.]+)s.*/\1/' <<<"$line")
python3 -c "import sys; t=float(sys.argv[1]); sys.exit(0 if ${BUDGET}*0.4 <= t <= ${BUDGET}*1.75 else 1)" "$took" &&
  ok || bad "a ${BUDGET}s budget took ${took}s"
[ "$(json_num "$W/a/config.json" time_budget_s)" = "6.0" ] && ok || bad "config.json lacks time_budget_s"
S=$(json_num "$W/a/config.json" steps)
[ "$S" -ge 50 ] && ok || bad "only $S steps planned"
# The schedule ends at the planned last step: the LR there is within 10% of min_lr.
python3 - "$W/a" <<'PY' && ok || bad "the LR was not decayed at the end of the --time run"
import json, sys
d = sys.argv[1]
cfg = json.load(open(d + "/config.json"))["train"]
last = [json.loads(l) for l in open(d + "/metrics.jsonl") if '"lr"' in l][-1]
assert last["step"] == cfg["steps"], (last, cfg["steps"])
assert last["lr"] <= 1.1 * cfg["min_lr"], (last["lr"], cfg["min_lr"])
PY

# ---- the plan is in the run: rebuilt from config.json, stopped halfway and resumed: same bits ----
# model.safetensors holds the best evaluation's weights, and the stop at H evaluates: H is one of
# the run's own evaluation steps (every 100), or that extra evaluation could pick another best.
H=$((S / 200 * 100))
[ "$H" -gt 0 ] || H=$((S / 2))
"$ATTO" train --config "$W/a/config.json" --out "$W/b" --steps $H --decay-steps $S -q >/dev/null && ok ||
  bad "rebuilding the --time run from its config failed"
"$ATTO" train --resume "$W/b" --steps $S -q >/dev/null && ok || bad "resuming the rebuilt run failed"
cmp -s "$W/a/model.safetensors" "$W/b/model.safetensors" && ok || bad "the --time run is not reproducible from its config"

# ---- bad budgets ---------------------------------------------------------------------------------
expect_fail "give --time or --steps, not both" "$ATTO" train --data "$W/names.txt" --out "$W/x1" --time 5m --steps 10
expect_fail "is not a duration" "$ATTO" train --data "$W/names.txt" --out "$W/x2" --time soon
expect_fail "unknown unit" "$ATTO" train --data "$W/names.txt" --out "$W/x3" --time 5d
expect_fail "too short" "$ATTO" train --data "$W/names.txt" --out "$W/x4" --time 0.001s
expect_fail "cannot be changed when resuming" "$ATTO" train --resume "$W/a" --time 1m
[ ! -e "$W/x4" ] && ok || bad "a refused --time left a run directory behind"

finish time
