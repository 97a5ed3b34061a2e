# Census part: output that cannot be written is an error (a full disk: /dev/full), and absurd
# sizes and counts in flags are refused before any work. Sourced by test_census.sh.
# FULL CMD...: runs CMD with its standard output on /dev/full.
FULL=(bash -c 'exec "$@" >/dev/full' --)
census "sample: stdout on a full disk" "standard output" "${FULL[@]}" "$ATTO" sample --model "$R" -n 2
census "sample --json: stdout on a full disk" "standard output" "${FULL[@]}" "$ATTO" sample --model "$R" -n 2 --json
census "score: stdout on a full disk" "standard output" "${FULL[@]}" "$ATTO" score --model "$R" maria
census "eval: stdout on a full disk" "standard output" "${FULL[@]}" "$ATTO" eval --model "$R" --data "$F/names.txt"
census "tokenize: stdout on a full disk" "standard output" bash -c 'exec "$@" >/dev/full <<<maria' -- "$ATTO" tokenize --model "$R"
census "translate: stdout on a full disk" "standard output" "${FULL[@]}" "$ATTO" translate --model "$F/s2s" --input "$F/toy.src"
census "train: stdout on a full disk" "standard output" "${FULL[@]}" "$ATTO" train --data "$F/names.txt" --out "$W/o_full" --n-layers 1 --d-model 16 --n-heads 2 --steps 2
mkdir -p "$W/prepdir/meta.json"
census "data prepare: meta.json is a directory" "meta.json" "$ATTO" data prepare --model "$R" --input "$F/names.txt" --out "$W/prepdir"
census "data synth: --out in a missing folder" "$W/nofolder" "$ATTO" data synth reverse --n 10 --out "$W/nofolder/x"
census "sample: --threads 100000" "--threads" "$ATTO" sample --model "$R" --threads 100000
census "score: --threads -1" "--threads" "$ATTO" score --model "$R" --threads -1 maria
census "eval: --threads 100000" "--threads" "$ATTO" eval --model "$R" --data "$F/names.txt" --threads 100000
census "inspect: --threads 100000" "--threads" "$ATTO" inspect --model "$R" --text maria --out "$W/o_i" --threads 100000
census "translate: --threads 100000" "--threads" "$ATTO" translate --model "$F/s2s" --input "$F/toy.src" --threads 100000
census "bench train: --threads 100000" "--threads" "$ATTO" bench train --threads 100000
census "sample: --max-tokens 10^9" "--max-tokens" "$ATTO" sample --model "$R" --max-tokens 1000000000
