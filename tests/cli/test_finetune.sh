#!/usr/bin/env bash
# atto train --init-from: fine-tune an imported GPT-2 checkpoint (the reduced one that
# tests/parity/ref_hf_gpt2.py --checkpoint-only writes) on a small text. The run directory is
# complete, records init_from and SOURCE's architecture, `atto sample` loads it, and its loss on
# the text is below the imported model's, in lines mode and from token files (atto data prepare)
# too; a model flag that conflicts with SOURCE exits 2 naming it.
ATTO=$1
SRC=$(cd "$(dirname "$0")/../.." && pwd)
source "$SRC/tests/cli/lib.sh"

# SOURCE: the checkpoint imported as a run (docs/finetune.md: import, then fine-tune).
write_hf_gpt2 "$W/hf" && expect_ok "$ATTO" import --from "$W/hf" --out "$W/gpt2"
for i in $(seq 1 80); do echo "the hat in the hut is the hat that the rat sat in, and the hut has a hat in it."; done \
  >"$W/text.txt"

expect_ok "$ATTO" train --init-from "$W/gpt2" --data "$W/text.txt" --out "$W/ft" --steps 30 --eval-every 10 \
  --lr 3e-3 --threads 2 --quiet
for f in config.json tokenizer.json model.safetensors train_state.safetensors metrics.jsonl; do
  [ -s "$W/ft/$f" ] && ok || bad "the fine-tuned run has no $f"
done
[ "$(py 'd["train"]["init_from"]' "$W/ft/config.json")" == "$W/gpt2" ] && ok || bad "config.json lacks init_from"
[ "$(py 'd["model"]["d_model"], d["model"]["block_size"], d["model"]["ffn"]' "$W/ft/config.json")" == \
  "32 16 gelu_tanh" ] && ok || bad "the architecture is not SOURCE's: $(cat "$W/ft/config.json")"
cmp -s "$W/gpt2/tokenizer.json" "$W/ft/tokenizer.json" && ok || bad "the tokenizer is not SOURCE's"
out=$("$ATTO" sample --model "$W/ft" -n 1 --max-tokens 5 --seed 1 --prompt "the hat" 2>&1)
[ $? -eq 0 ] && [[ "$out" == "the hat"* ]] && ok || bad "atto sample on the fine-tuned run: $out"
# The validation loss went down: the imported model's on the text, then the fine-tuned one's.
loss() { "$ATTO" eval --model "$1" --data "${2:-$W/text.txt}" 2>&1 | awk '$1 == "loss" { print $2 }'; }
before=$(loss "$W/gpt2")
after=$(loss "$W/ft")
python3 -c "import sys; sys.exit(0 if float('$after') < float('$before') else 1)" 2>/dev/null && ok ||
  bad "fine-tuning did not lower the loss: $before -> $after"

# --time plans the steps of SOURCE's model (it picked a size before, which then conflicted).
out=$("$ATTO" train --init-from "$W/gpt2" --data "$W/text.txt" --out "$W/timed" --time 3s --threads 2 2>&1)
[ $? -eq 0 ] && grep -qF "the model of --init-from $W/gpt2" <<<"$out" && ok || bad "--time with --init-from: $out"

# LoRA: adapters over the frozen base; sample and score load the run merged; export asks for
# --merge-lora, and the merged export scores as the run does.
expect_ok "$ATTO" train --init-from "$W/gpt2" --data "$W/text.txt" --out "$W/lora" --steps 30 --eval-every 10 \
  --lora-rank 4 --lora-targets qkv,fc --threads 2 --quiet
[ -s "$W/lora/adapter.safetensors" ] && ok || bad "the LoRA run has no adapter.safetensors"
cmp -s "$W/gpt2/model.safetensors" "$W/lora/model.safetensors" && ok || bad "the LoRA run's base is not SOURCE's"
lora_after=$(loss "$W/lora")
python3 -c "import sys; sys.exit(0 if float('$lora_after') < float('$before') else 1)" 2>/dev/null && ok ||
  bad "LoRA did not lower the loss: $before -> $lora_after"
expect_fail "pass --merge-lora" "$ATTO" export --model "$W/lora" --out "$W/lora.gguf"
expect_ok "$ATTO" export --model "$W/lora" --out "$W/lora.gguf" --merge-lora
[ "$(loss "$W/lora.gguf")" == "$lora_after" ] && ok || bad "the merged GGUF scores $(loss "$W/lora.gguf"), not $lora_after"
expect_fail "has no LoRA adapter" "$ATTO" export --model "$W/ft" --out "$W/ft.gguf" --merge-lora
expect_fail "LoRA trains adapters over the frozen weights" "$ATTO" train --data "$W/text.txt" --out "$W/nolora" \
  --lora-rank 4

# A conflicting model flag: exit status 2, the flag and both values named, nothing written.
"$ATTO" train --init-from "$W/gpt2" --data "$W/text.txt" --out "$W/bad" --d-model 64 2>"$W/err.txt"
rc=$?
[ $rc -eq 2 ] && ok || bad "--d-model 64 with --init-from exits $rc, not 2"
grep -qF -- "--d-model 64 conflicts with --init-from $W/gpt2 (d_model 32): leave it out" "$W/err.txt" && ok ||
  bad "message: $(cat "$W/err.txt")"
[ ! -e "$W/bad/config.json" ] && ok || bad "a refused run wrote $W/bad"
expect_fail "cannot be changed when resuming" "$ATTO" train --resume "$W/ft" --init-from "$W/gpt2" --steps 40

# Every data mode: lines (one sample per line), and a big corpus's token files (atto data prepare
# with SOURCE's tokenizer), fully and with LoRA; each lowers the loss on the text.
expect_ok "$ATTO" data prepare --model "$W/gpt2" --input "$W/text.txt" --out "$W/prep" --val-fraction 0.1
for i in $(seq 1 60); do echo "the hat"; echo "a rat sat"; echo "the hut"; done >"$W/lines.txt"
for how in "lines --data $W/lines.txt --mode lines" "tokens --data $W/prep" "tokens_lora --data $W/prep --lora-rank 4"; do
  name=${how%% *}
  # shellcheck disable=SC2086
  expect_ok "$ATTO" train --init-from "$W/gpt2" ${how#* } --out "$W/ft_$name" --steps 20 --eval-every 10 --lr 3e-3 \
    --threads 2 --quiet
  if [ $name = lines ]; then  # the same measure: SOURCE's loss in lines mode (one step at lr 1e-12)
    # shellcheck disable=SC2086
    expect_ok "$ATTO" train --init-from "$W/gpt2" ${how#* } --out "$W/ft_lines0" --steps 1 --lr 1e-12 \
      --min-lr 0 --quiet
    from=$(loss "$W/ft_lines0" "$W/lines.txt") after=$(loss "$W/ft_lines" "$W/lines.txt")
  else
    from=$(loss "$W/gpt2") after=$(loss "$W/ft_$name")
  fi
  python3 -c "import sys; sys.exit(0 if float('$after') < float('$from') else 1)" 2>/dev/null && ok ||
    bad "fine-tuning from $name data did not lower the loss: $from -> $after"
done
# Token files of another tokenizer are refused, naming the fix.
expect_ok "$ATTO" train --data "$W/text.txt" --out "$W/char" --steps 2 --quiet
expect_ok "$ATTO" data prepare --model "$W/char" --input "$W/text.txt" --out "$W/prep_char" --val-fraction 0.1
expect_fail "was prepared with another tokenizer than --init-from" "$ATTO" train --init-from "$W/gpt2" \
  --data "$W/prep_char" --out "$W/mismatch" --steps 2

finish finetune
