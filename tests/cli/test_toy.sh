#!/usr/bin/env bash
# The toy set of the NumPy encoder-decoder tutorial, trained as the tutorial does (plain SGD,
# lr 0.01) from the command line: a 3-pair corpus is trained on whole (no pair held out), SGD
# with momentum resumes bit-exact, and the model translates every pair exactly, greedy and beam.
# Usage: test_toy.sh PATH/TO/atto
set -u
ATTO=${1:?usage: test_toy.sh path/to/atto}
. "$(dirname "$0")/lib.sh"

write_toy "$W"
TOY=(--task seq2seq --src "$W/toy.src" --tgt "$W/toy.tgt" --tokenizer word --d-model 12 --n-heads 3
     --n-enc-layers 1 --n-dec-layers 1 --d-ff 12 --dropout 0 --label-smoothing 0 --schedule constant --warmup 0
     --eval-bleu 0 --best-by loss --eval-every 250 --log-every 250)

# ---- plain SGD, lr 0.01, no clipping (the tutorial's update) -------------------------------------
out=$("$ATTO" train "${TOY[@]}" --out "$W/sgd" --optimizer sgd --lr 0.01 --grad-clip 0 --steps 1500 2>&1)
[ $? -eq 0 ] && ok || bad "SGD training failed: $out"
grep -q "all 3 pairs trained on" <<<"$out" && ok || bad "a 3-pair corpus was split: $out"
grep -q "train-set loss" <<<"$out" && ok || bad "validation on the training set is not labelled: $out"
grep -q '"optimizer": "sgd"' "$W/sgd/config.json" && ok || bad "config.json does not record sgd"
grep -q "\"val_is_train\":true" "$W/sgd/metrics.jsonl" && ok || bad "metrics.jsonl does not mark the training-set evaluation"
for beam in 1 2 3 4 5 6 7 8; do
  got=$("$ATTO" translate --model "$W/sgd" --beam $beam --input "$W/toy.src")
  [ "$got" = "$(cat "$W/toy.tgt")" ] && ok || bad "beam $beam translates the toy set as: $(tr '\n' '|' <<<"$got")"
done

# ---- SGD with Nesterov momentum resumes bit-exact ---------------------------------------------
MOM=(--optimizer sgd --lr 0.01 --momentum 0.9 --nesterov -q)
"$ATTO" train "${TOY[@]}" "${MOM[@]}" --out "$W/full" --steps 300 >/dev/null && ok || bad "SGD momentum training failed"
"$ATTO" train "${TOY[@]}" "${MOM[@]}" --out "$W/half" --steps 250 >/dev/null && ok || bad "SGD momentum training failed"
"$ATTO" train --resume "$W/half" --steps 300 -q >/dev/null && ok || bad "SGD momentum resume failed"
cmp -s "$W/full/model.safetensors" "$W/half/model.safetensors" && ok || bad "SGD resume is not bit-exact"
for f in full half; do
  got=$("$ATTO" translate --model "$W/$f" --beam 4 --input "$W/toy.src")
  [ "$got" = "$(cat "$W/toy.tgt")" ] && ok || bad "$f (momentum) translates the toy set as: $(tr '\n' '|' <<<"$got")"
done

# ---- bad optimizer flags -------------------------------------------------------------------------
expect_fail "--optimizer must be adamw, adam or sgd" "$ATTO" train "${TOY[@]}" --out "$W/x1" --optimizer lbfgs
expect_fail "--momentum and --nesterov are SGD's" "$ATTO" train "${TOY[@]}" --out "$W/x2" --momentum 0.9
expect_fail "--nesterov needs --momentum > 0" "$ATTO" train "${TOY[@]}" --out "$W/x3" --optimizer sgd --nesterov
expect_fail "--momentum must be in [0, 1)" "$ATTO" train "${TOY[@]}" --out "$W/x4" --optimizer sgd --momentum 1
expect_fail "allowed with --resume: " "$ATTO" train --resume "$W/full" --optimizer adam
"$ATTO" train --resume "$W/full" --optimizer adam 2>&1 | grep -q -- "--eval-bleu" && ok || bad "resume's allowed list lacks --eval-bleu"

finish toy
