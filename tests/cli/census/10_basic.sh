# Census part: the first cases (data files, flags, configs, run directories, models, seq2seq,
# data prepare, tokenize, serve flags). Sourced by test_census.sh, which defines census, $F, $R,
# $W, $ATTO and the fixtures.
# atto train: data files
census "train: missing data file" "$F/missing.txt" "$ATTO" train --data "$F/missing.txt" --out "$W/o1"
census "train: empty data file" "$F/empty.txt" "$ATTO" train --data "$F/empty.txt" --out "$W/o2"
census "train: binary data file" "$F/binary.bin" "$ATTO" train --data "$F/binary.bin" --out "$W/o3"
census "train: non-UTF-8 data" "$F/latin1.txt" "$ATTO" train --data "$F/latin1.txt" --out "$W/o4"
census "train: data is a directory" "$F/adir" "$ATTO" train --data "$F/adir" --out "$W/o5"
census "train: data is /dev/zero" "/dev/zero" "$ATTO" train --data /dev/zero --out "$W/o6"
# atto train: absurd numbers in flags
census "train: --steps -1" "--steps" "$ATTO" train --data "$F/names.txt" --out "$W/o7" --steps -1
census "train: --batch-size -4" "--batch-size" "$ATTO" train --data "$F/names.txt" --out "$W/o8" --batch-size -4
census "train: --batch-size 10^9" "--batch-size" "$ATTO" train --data "$F/names.txt" --out "$W/o9" --batch-size 1000000000
census "train: --d-model 10^6" "--d-model" "$ATTO" train --data "$F/names.txt" --out "$W/o10" --d-model 1000000
census "train: --n-layers 10^5" "--n-layers" "$ATTO" train --data "$F/names.txt" --out "$W/o11" --n-layers 100000
census "train: --block-size 10^8" "block_size" "$ATTO" train --data "$F/names.txt" --out "$W/o12" --block-size 100000000
census "train: --lr -1" "--lr" "$ATTO" train --data "$F/names.txt" --out "$W/o13" --lr -1
census "train: --dropout 1.5" "dropout 1.5" "$ATTO" train --data "$F/names.txt" --out "$W/o14" --dropout 1.5
census "train: --n-heads 3 for d 16" "n_heads" "$ATTO" train --data "$F/names.txt" --out "$W/o15" --d-model 16 --n-heads 3
census "train: --threads -5" "--threads" "$ATTO" train --data "$F/names.txt" --out "$W/o16" --threads -5
census "train: --threads 100000" "--threads" "$ATTO" train --data "$F/names.txt" --out "$W/o16b" --threads 100000
census "train: --vocab-size -3" "--vocab-size" "$ATTO" train --data "$F/names.txt" --out "$W/o17" --tokenizer bpe --vocab-size -3
census "train: --time 0s" "--time" "$ATTO" train --data "$F/names.txt" --out "$W/o18" --time 0s
# atto train: configs and output paths
census "train: --config broken JSON" "$F/badconfig.json" "$ATTO" train --data "$F/names.txt" --out "$W/o19" --config "$F/badconfig.json"
census "train: --config unknown key" "no_such_key" "$ATTO" train --data "$F/names.txt" --out "$W/o20" --config "$F/unknown.json"
census "train: --out cannot be written" "$NOWRITE" "$ATTO" train --data "$F/names.txt" --out "$NOWRITE/run" --steps 2
census "train: --out holds a run" "$R" "$ATTO" train --data "$F/names.txt" --out "$R"
# atto train --resume: broken run directories
census "resume: missing run" "$F/nosuch" "$ATTO" train --resume "$F/nosuch" --steps 8
census "resume: future format_version" "format_version" "$ATTO" train --resume "$F/future" --steps 8
census "resume: broken config.json" "$F/badcfg/config.json" "$ATTO" train --resume "$F/badcfg" --steps 8
census "resume: truncated train_state" "$F/state/train_state.safetensors" "$ATTO" train --resume "$F/state" --steps 8
census "resume: config disagrees with the weights" "$F/disagree" "$ATTO" train --resume "$F/disagree" --steps 8
if "${AS_OTHER[@]}" "$ATTO" --version >/dev/null 2>&1; then
  census "resume: read-only run directory" "$F/ro" "${AS_OTHER[@]}" "$ATTO" train --resume "$F/ro" --steps 8
else
  echo "census: the read-only case is not run: ${AS_OTHER[*]} cannot run $ATTO (a folder above it is closed to others)"
fi
census "resume: --steps not beyond the run" "--steps" "$ATTO" train --resume "$R" --steps 2
# commands that load a model
census "sample: missing run" "$F/nosuch" "$ATTO" sample --model "$F/nosuch"
census "sample: NaN weights" "non-finite" "$ATTO" sample --model "$F/nan" -n 2
census "score: NaN weights" "non-finite" "$ATTO" score --model "$F/nan" maria
census "eval: NaN weights" "non-finite" "$ATTO" eval --model "$F/nan" --data "$F/names.txt"
census "inspect: NaN weights" "non-finite" "$ATTO" inspect --model "$F/nan" --text maria --out "$W/insp"
census "sample: truncated weights" "$F/trunc/model.safetensors" "$ATTO" sample --model "$F/trunc"
census "sample: future format_version" "format_version" "$ATTO" sample --model "$F/future"
census "sample: config disagrees with the weights" "$F/disagree" "$ATTO" sample --model "$F/disagree"
census "sample: broken tokenizer.json" "$F/badtok/tokenizer.json" "$ATTO" sample --model "$F/badtok"
census "sample: no tokenizer.json" "tokenizer.json" "$ATTO" sample --model "$F/notok"
census "sample: tokenizer smaller than the model" "$F/vocab" "$ATTO" sample --model "$F/vocab"
census "sample: truncated GGUF" "$F/trunc.gguf" "$ATTO" sample --model "$F/trunc.gguf"
census "sample: -n -1" "-n" "$ATTO" sample --model "$R" -n -1
census "sample: --temperature -1" "--temperature" "$ATTO" sample --model "$R" --temperature -1
census "sample: --top-p 2" "--top-p" "$ATTO" sample --model "$R" --top-p 2
census "sample: --frequency-penalty 3" "--frequency-penalty" "$ATTO" sample --model "$R" --frequency-penalty 3
census "sample: --logit-bias without =" "TOKEN_ID=BIAS" "$ATTO" sample --model "$R" --logit-bias 5
census "sample: --logit-bias past the vocabulary" "outside this model's vocabulary" "$ATTO" sample --model "$R" --logit-bias 99999=1
census "sample: --logit-bias 3=500" "must be in [-100, 100]" "$ATTO" sample --model "$R" --logit-bias 3=500
census "score: --file is a directory" "$F/adir" "$ATTO" score --model "$R" --file "$F/adir"
census "eval: missing data" "$F/missing.txt" "$ATTO" eval --model "$R" --data "$F/missing.txt"
census "export: --type bogus" "--type" "$ATTO" export --model "$R" --out "$W/x.gguf" --type bogus
census "export: --out cannot be written" "$NOWRITE" "$ATTO" export --model "$R" --out "$NOWRITE/x.gguf"
# encoder-decoder
census "translate: a GPT run" "$R" "$ATTO" translate --model "$R" --input "$F/toy.src"
census "translate: --beam 0" "--beam" "$ATTO" translate --model "$F/s2s" --beam 0 --input "$F/toy.src"
census "train seq2seq: files of different lengths" "$F/two.src" "$ATTO" train --task seq2seq --src "$F/two.src" --tgt "$F/one.tgt" --out "$W/o21"
census "train seq2seq: TSV without tabs" "$F/notab.tsv" "$ATTO" train --task seq2seq --data "$F/notab.tsv" --out "$W/o22"
# data, tokenizers, server
census "data prepare: missing input" "$F/missing.txt" "$ATTO" data prepare --model "$R" --input "$F/missing.txt" --out "$W/prep"
census "tokenize: broken tokenizer" "$F/badtok/tokenizer.json" "$ATTO" tokenize --tokenizer "$F/badtok/tokenizer.json"
census "serve: --port 99999" "--port" "$ATTO" serve --model "$R" --port 99999
census "serve: NaN weights" "non-finite" "$ATTO" serve --model "$F/nan" --port 0

