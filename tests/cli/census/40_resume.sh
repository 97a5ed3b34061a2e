# Census part: resuming a damaged run, and the training side of the arithmetic and message
# classes (issue 41, classes 4, 5 and 7). Every resume case must fail before anything in the run
# directory changes (the census checks that no fixture file changed: config.json is not
# rewritten, metrics.jsonl not truncated, a stale temporary file not yet removed), naming the
# file and the field. Sourced by test_census.sh ($F, $R, $W, $ATTO, census, variant, edit_config).

# edit_state RUN PYTHON: rewrites RUN/train_state.safetensors after PYTHON ran on md (its
# __metadata__, a dict of strings), h (the header) and data (the data section, a bytearray).
edit_state() {
  python3 - "$1/train_state.safetensors" "$2" <<'EOF'
import json, math, struct, sys
p = sys.argv[1]
b = open(p, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
md = h["__metadata__"]
data = bytearray(b[8 + n:])
def put(name, x):  # the first float of tensor `name` = x
    begin = h[name]["data_offsets"][0]
    data[begin:begin + 4] = struct.pack("<f", x)
def first(prefix, suffix):
    return sorted(k for k in h if k.startswith(prefix) and k.endswith(suffix))[0]
exec(sys.argv[2])
hb = json.dumps(h).encode()
hb += b" " * (-len(hb) % 8)
open(p, "wb").write(struct.pack("<Q", len(hb)) + hb + bytes(data))
EOF
}
# resume_case DIR WHAT WANT: `atto train --resume $F/DIR` fails naming WANT, changing nothing.
resume_case() { census "resume: $2" "$3" "$ATTO" train --resume "$F/$1" --steps 8; }
# state_case NAME KEY VALUE: a copy of the run whose train_state metadata KEY is VALUE, resumed.
state_case() {
  variant "st_$1" && edit_state "$F/st_$1" "md['$2'] = '$3'"
  resume_case "st_$1" "train_state $2 = '$3'" "$F/st_$1/train_state.safetensors: metadata '$2'"
}

# train_state's metadata, one bad value each: the file and the key named, nothing changed. The
# first also holds a stale temporary file of a killed save (pid 2^22 + 1 is above Linux's
# pid_max default, so no process has it): it stays until the state has been validated.
state_case neg step -100
printf 'partial' >"$F/st_neg/config.json.tmp.4194305.0"
state_case exp step 1e3
state_case junk step 20abc
state_case empty step ""
state_case huge step 99999999999999999999
state_case plus step +4
state_case best_neg best_step -5
state_case skipped_neg skipped_steps -1
state_case evals_neg evals_without_improvement -3
state_case elapsed_neg elapsed_seconds -1
state_case elapsed_nan elapsed_seconds nan
state_case version atto_format_version 2
state_case rng_junk data_rng "1 2 3 4 junk"
state_case rng_zero data_rng "0 0 0 0"
state_case rng_short dropout_rng "1 2 3"
state_case rng_spaces data_rng "1  2 3 4"
state_case rng_neg dropout_rng "1 2 -3 4"
state_case loss_nan best_val_loss nan
state_case loss_inf best_val_loss inf
state_case loss_abc best_val_loss abc
state_case best_after best_step 99
variant st_missing && edit_state "$F/st_missing" "del md['skipped_steps']"
resume_case st_missing "train_state without skipped_steps" \
  "$F/st_missing/train_state.safetensors: metadata key 'skipped_steps'"
variant st_unknown && edit_state "$F/st_unknown" "md['extra'] = '1'"
resume_case st_unknown "train_state with an unknown key" "$F/st_unknown/train_state.safetensors: unknown metadata key"
# The state's step beyond the steps config.json plans (4): the two files are not one run.
state_case beyond step 1000000
# Numbers that parse and agree with each other but not with the optimizer's own step count.
variant st_optstep &&
  edit_state "$F/st_optstep" "md['step'] = md['best_step'] = '2'; md['evals_without_improvement'] = '0'"
resume_case st_optstep "train_state step disagrees with the optimizer" \
  "$F/st_optstep/train_state.safetensors: metadata 'step' = 2 disagrees"
# Tensors of the state: a NaN moment (it was blamed on --lr), a negative second moment.
variant st_nan && edit_state "$F/st_nan" "put(first('optim.', '.exp_avg'), math.nan)"
resume_case st_nan "NaN in an optimizer moment" "$F/st_nan/train_state.safetensors: tensor 'optim."
variant st_negsq && edit_state "$F/st_negsq" "put(first('optim.', '.exp_avg_sq'), -1.0)"
resume_case st_negsq "negative second moment" "$F/st_negsq/train_state.safetensors: tensor 'optim."
variant st_wnan && edit_state "$F/st_wnan" "put(first('model.', '.weight'), math.inf)"
resume_case st_wnan "Inf in the state's weights" "$F/st_wnan/train_state.safetensors: tensor 'model."

# The rest of the run: the best weights and metrics.jsonl are checked before anything changes.
resume_case nan "NaN in the best weights" "$F/nan/model.safetensors"
variant nobest && rm "$F/nobest/model.safetensors"
resume_case nobest "no model.safetensors" "$F/nobest/model.safetensors"
variant mfifo && rm "$F/mfifo/metrics.jsonl" && mkfifo "$F/mfifo/metrics.jsonl"
resume_case mfifo "metrics.jsonl is a FIFO" "$F/mfifo/metrics.jsonl"
variant mzero && ln -sf /dev/zero "$F/mzero/metrics.jsonl"
resume_case mzero "metrics.jsonl is /dev/zero" "$F/mzero/metrics.jsonl"
variant mdir && rm "$F/mdir/metrics.jsonl" && mkdir "$F/mdir/metrics.jsonl"
resume_case mdir "metrics.jsonl is a directory" "$F/mdir/metrics.jsonl"

# Values from a config file are named by the file and the key, never by a flag not given.
variant eps_small && sed -i 's/"eps": [^,]*/"eps": 1e-400/' "$F/eps_small/config.json"
resume_case eps_small "config.json eps 1e-400" "$F/eps_small/config.json: key 'eps'"
variant eps_big && sed -i 's/"eps": [^,]*/"eps": 1e400/' "$F/eps_big/config.json"
resume_case eps_big "config.json eps 1e400" "$F/eps_big/config.json"
variant lr_float && sed -i 's/"lr": [^,]*/"lr": 1e300/' "$F/lr_float/config.json"
resume_case lr_float "config.json lr beyond a float" "$F/lr_float/config.json: key 'lr'"
printf '{"eps": 1e-400}' >"$F/eps_tiny.json"
census "train: --config eps 1e-400" "$F/eps_tiny.json: key 'eps'" \
  "$ATTO" train --data "$F/names.txt" --out "$W/e1" --config "$F/eps_tiny.json"
printf '{"train": {"eps": 1e400}}' >"$F/eps_huge.json"
census "train: --config eps 1e400" "$F/eps_huge.json" \
  "$ATTO" train --data "$F/names.txt" --out "$W/e2" --config "$F/eps_huge.json"
printf '{"steps": -3}' >"$F/steps_neg.json"
census "train: --config steps -3" "$F/steps_neg.json: key 'steps'" \
  "$ATTO" train --data "$F/names.txt" --out "$W/e3" --config "$F/steps_neg.json"

# A run that never saved a step (stopped before its first evaluation): resuming it and training
# into it again say what to do instead of advising --resume.
variant nostep && rm "$F/nostep/train_state.safetensors" "$F/nostep/model.safetensors"
resume_case nostep "a run that never saved a step" "never saved a step"
census "train: --out holds a run that never saved a step" "--force" \
  "$ATTO" train --data "$F/names.txt" --out "$F/nostep" --steps 8

# Data too small for any batch: an error naming the file, never a division by zero.
printf 'a' >"$F/one.txt"
census "train: a 1-byte data file" "$F/one.txt" "$ATTO" train --data "$F/one.txt" --out "$W/d1"
census "train: a 1-byte data file, stream mode" "$F/one.txt" \
  "$ATTO" train --data "$F/one.txt" --mode stream --out "$W/d2"
census "train: a 1-byte data file, lines mode" "$F/one.txt" \
  "$ATTO" train --data "$F/one.txt" --mode lines --out "$W/d3"
census "train: a 1-byte data file, bpe" "$F/one.txt" \
  "$ATTO" train --data "$F/one.txt" --tokenizer bpe --vocab-size 300 --out "$W/d4"
census "train: a 1-byte data file, --time" "$F/one.txt" "$ATTO" train --data "$F/one.txt" --time 30s --out "$W/d5"
census "train: a 1-byte data file, --batch-size 1" "$F/one.txt" \
  "$ATTO" train --data "$F/one.txt" --batch-size 1 --out "$W/d6"
census "train seq2seq: 1-byte files" "$F/one.txt" \
  "$ATTO" train --task seq2seq --src "$F/one.txt" --tgt "$F/one.txt" --out "$W/d7"
