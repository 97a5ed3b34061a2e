# Census part: the one file rule (base/files.h) for every file atto reads: a FIFO never blocks, a
# device never streams, a directory is named as one, a file over its size cap is refused before it
# is read. Sourced by test_census.sh (census, $F, $R, $W, $ATTO, variant).
mkfifo "$F/fifo"
FIFO=$F/fifo
# Files over their cap (sparse), outside $F: the census checksums every file in $F around each case.
BIG=$W/big
mkdir -p "$BIG" && cp -r "$R" "$BIG/bigtok"
truncate -s 100M "$BIG/huge.json"                    # over the 64 MiB cap of a JSON file
truncate -s 600M "$BIG/bigtok/tokenizer.json"        # over the 512 MiB cap of a tokenizer file
expect_ok "$ATTO" tokenizer train --input "$F/names.txt" --vocab-size 300 --out "$F/bpe.json"
expect_ok "$ATTO" data prepare --tokenizer "$F/bpe.json" --input "$F/names.txt" --out "$F/prep"
printf '{"a": 0, "b": 1}' >"$F/encoder.json"
for v in fifocfg fifotok fifost zerocfg zerotok zerost dirtok; do variant "$v"; done
rm "$F/fifocfg/config.json" "$F/fifotok/tokenizer.json" "$F/fifost/model.safetensors"
mkfifo "$F/fifocfg/config.json" "$F/fifotok/tokenizer.json" "$F/fifost/model.safetensors"
ln -sf /dev/zero "$F/zerocfg/config.json"
ln -sf /dev/zero "$F/zerotok/tokenizer.json"
ln -sf /dev/zero "$F/zerost/model.safetensors"
rm "$F/dirtok/tokenizer.json" && mkdir "$F/dirtok/tokenizer.json"
cp -r "$F/prep" "$F/prepfifo" && rm "$F/prepfifo/train.bin" && mkfifo "$F/prepfifo/train.bin"
cp -r "$F/prep" "$F/prepzero" && ln -sf /dev/zero "$F/prepzero/val.bin"

census "train: --data is a FIFO" "$FIFO" "$ATTO" train --data "$FIFO" --out "$W/f1"
census "train: --config is a FIFO" "$FIFO" "$ATTO" train --data "$F/names.txt" --out "$W/f2" --config "$FIFO"
census "train: --config is /dev/zero" "/dev/zero" "$ATTO" train --data "$F/names.txt" --out "$W/f3" --config /dev/zero
census "train: --config is a directory" "$F/adir" "$ATTO" train --data "$F/names.txt" --out "$W/f4" --config "$F/adir"
census "train: --config of 100 MB" "$BIG/huge.json" "$ATTO" train --data "$F/names.txt" --out "$W/f5" --config "$BIG/huge.json"
census "train: prepared corpus whose train.bin is a FIFO" "train.bin" "$ATTO" train --data "$F/prepfifo" --out "$W/f6" --steps 2
census "train: prepared corpus whose val.bin is /dev/zero" "val.bin" "$ATTO" train --data "$F/prepzero" --out "$W/f7" --steps 2
census "sample: config.json is a FIFO" "$F/fifocfg/config.json" "$ATTO" sample --model "$F/fifocfg"
census "sample: config.json is /dev/zero" "$F/zerocfg/config.json" "$ATTO" sample --model "$F/zerocfg"
census "sample: tokenizer.json is a FIFO" "$F/fifotok/tokenizer.json" "$ATTO" sample --model "$F/fifotok"
census "sample: tokenizer.json is /dev/zero" "$F/zerotok/tokenizer.json" "$ATTO" sample --model "$F/zerotok"
census "sample: tokenizer.json is a directory" "$F/dirtok/tokenizer.json" "$ATTO" sample --model "$F/dirtok"
census "sample: tokenizer.json of 600 MB" "$BIG/bigtok/tokenizer.json" "$ATTO" sample --model "$BIG/bigtok"
census "sample: model.safetensors is a FIFO" "$F/fifost/model.safetensors" "$ATTO" sample --model "$F/fifost"
census "sample: model.safetensors is /dev/zero" "$F/zerost/model.safetensors" "$ATTO" sample --model "$F/zerost"
census "sample: --model is a FIFO" "$FIFO" "$ATTO" sample --model "$FIFO"
census "resume: config.json is a FIFO" "$F/fifocfg/config.json" "$ATTO" train --resume "$F/fifocfg" --steps 8
census "resume: model.safetensors is /dev/zero" "$F/zerost/model.safetensors" "$ATTO" train --resume "$F/zerost" --steps 8
census "score: --file is a FIFO" "$FIFO" "$ATTO" score --model "$R" --file "$FIFO"
census "score: --file is /dev/zero" "/dev/zero" "$ATTO" score --model "$R" --file /dev/zero
census "eval: --data is a FIFO" "$FIFO" "$ATTO" eval --model "$R" --data "$FIFO"
census "translate: --input is a FIFO" "$FIFO" "$ATTO" translate --model "$F/s2s" --input "$FIFO"
census "translate: --input is /dev/zero" "/dev/zero" "$ATTO" translate --model "$F/s2s" --input /dev/zero
census "data prepare: --input is a FIFO" "$FIFO" "$ATTO" data prepare --model "$R" --input "$FIFO" --out "$W/f8"
census "tokenize: --tokenizer is a FIFO" "$FIFO" "$ATTO" tokenize --tokenizer "$FIFO"
census "tokenizer import-gpt2: --encoder is a FIFO" "$FIFO" "$ATTO" tokenizer import-gpt2 --encoder "$FIFO" --merges "$F/merges.bpe" --out "$W/f9.json"
census "tokenizer import-gpt2: --encoder is /dev/zero" "/dev/zero" "$ATTO" tokenizer import-gpt2 --encoder /dev/zero --merges "$F/merges.bpe" --out "$W/f10.json"
census "tokenizer import-gpt2: --merges is /dev/zero" "/dev/zero" "$ATTO" tokenizer import-gpt2 --encoder "$F/encoder.json" --merges /dev/zero --out "$W/f11.json"
census "tokenizer import-gpt2: --encoder is a directory" "$F/adir" "$ATTO" tokenizer import-gpt2 --encoder "$F/adir" --merges "$F/merges.bpe" --out "$W/f12.json"
census "tokenizer train: --input is a FIFO" "$FIFO" "$ATTO" tokenizer train --input "$FIFO" --out "$W/f13.json"
