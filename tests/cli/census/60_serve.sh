# Census part: atto serve's flags and key files, refused before the server starts (each names the
# flag and its range, or the file). A serve that would start is never a census case.
census "serve: --api-key empty" "--api-key" "$ATTO" serve --model "$R" --port 0 --api-key ""
census "serve: --api-key with a newline" "--api-key" "$ATTO" serve --model "$R" --port 0 --api-key $'k\nX-Evil: 1'
census "serve: --slots 10^6" "--slots" "$ATTO" serve --model "$R" --port 0 --slots 1000000
census "serve: --slots 0" "--slots" "$ATTO" serve --model "$R" --port 0 --slots 0
census "serve: --queue 10^9" "--queue" "$ATTO" serve --model "$R" --port 0 --queue 1000000000
census "serve: --queue -1" "--queue" "$ATTO" serve --model "$R" --port 0 --queue -1
census "serve: --threads 100000" "--threads" "$ATTO" serve --model "$R" --port 0 --threads 100000
census "serve: --threads -5" "--threads" "$ATTO" serve --model "$R" --port 0 --threads -5
census "serve: --max-tokens-cap 10^9" "--max-tokens-cap" "$ATTO" serve --model "$R" --port 0 --max-tokens-cap 1000000000
census "serve: --timeout 0" "--timeout" "$ATTO" serve --model "$R" --port 0 --timeout 0
census "serve: --body-limit 0" "--body-limit" "$ATTO" serve --model "$R" --port 0 --body-limit 0
census "serve: --body-limit 10^12" "--body-limit" "$ATTO" serve --model "$R" --port 0 --body-limit 1000000000000
# --api-key-file: the one file rule (base/files.h), and a key that is really there.
mkdir -p "$F/keys/adir"
mkfifo "$F/keys/fifo"
head -c 1048576 /dev/zero | tr '\0' 'k' >"$F/keys/big"
: >"$F/keys/empty"
printf '\nsecond-line-key\n' >"$F/keys/emptyline"
census "serve: --api-key-file /dev/zero" "/dev/zero" "$ATTO" serve --model "$R" --port 0 --api-key-file /dev/zero
census "serve: --api-key-file a FIFO" "$F/keys/fifo" "$ATTO" serve --model "$R" --port 0 --api-key-file "$F/keys/fifo"
census "serve: --api-key-file a directory" "$F/keys/adir" "$ATTO" serve --model "$R" --port 0 --api-key-file "$F/keys/adir"
census "serve: --api-key-file of 1 MB" "$F/keys/big" "$ATTO" serve --model "$R" --port 0 --api-key-file "$F/keys/big"
census "serve: --api-key-file empty" "the file is empty" "$ATTO" serve --model "$R" --port 0 --api-key-file "$F/keys/empty"
census "serve: --api-key-file empty first line" "the first line is empty" "$ATTO" serve --model "$R" --port 0 --api-key-file "$F/keys/emptyline"
census "serve: --api-key-file missing" "$F/keys/nosuch" "$ATTO" serve --model "$R" --port 0 --api-key-file "$F/keys/nosuch"
census "serve: --api-key and --api-key-file" "--api-key-file" "$ATTO" serve --model "$R" --port 0 --api-key k --api-key-file "$F/keys/big"
