#!/usr/bin/env bash
# GPT-2 small's shapes side by side: `atto bench train` against PyTorch 1.13 (bench/e2e/ref_torch.py)
# at block 256 and 1024, fp32 and bf16 (PyTorch: torch.autocast), batch 4, random weights and
# tokens, atto and PyTorch alternating setting by setting in one run. Prints tokens/s, their
# ratio and each side's peak resident memory, with the CPU. Both get the same OpenBLAS core type
# (OPENBLAS_CORETYPE: SkylakeX on an AVX-512 CPU, else Haswell, as atto picks; set it to
# override), PyTorch OPENBLAS_NUM_THREADS=2 and 2 threads.
#   bench/gpt2/run.sh build/atto
# Environment: BLOCKS ("256 1024"), PRECISIONS ("fp32 bf16"), STEPS (3; 2 at block 1024),
# LORA (0: full fine-tuning steps; R: LoRA rank R on qkv), RECOMPUTE (1: atto with --recompute;
# PyTorch keeps its activations as it does by default), PYTHON (/usr/bin/python3).
set -euo pipefail
ATTO=${1:?usage: bench/gpt2/run.sh path/to/atto}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
PY=${PYTHON:-/usr/bin/python3}
LORA=${LORA:-0}
grep -qw avx512f /proc/cpuinfo && core=SkylakeX || core=Haswell
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-$core}
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores; OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE"
"$ATTO" --version | sed 's/^/  /'
M=(--vocab-size 50257 --d-model 768 --n-heads 12 --n-layers 12 --batch-size 4 --ffn gelu_tanh --warmup 1
   --lora-rank "$LORA")
A=()
[ "${RECOMPUTE:-0}" = 1 ] && A=(--recompute)
field() { grep '^{' | tail -1 | "$PY" -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }
printf '| block | precision | atto tokens/s | PyTorch tokens/s | atto / PyTorch | peak RSS atto / PyTorch (GiB) |\n'
printf '|---|---|---|---|---|---|\n'
for T in ${BLOCKS:-256 1024}; do
  steps=${STEPS:-$([ "$T" -ge 1024 ] && echo 2 || echo 3)}
  for p in ${PRECISIONS:-fp32 bf16}; do
    a=$("$ATTO" bench train "${M[@]}" --block-size "$T" --steps "$steps" --threads 2 --precision "$p" "${A[@]}" --json)
    t=$(OPENBLAS_NUM_THREADS=2 "$PY" "$SRC/bench/e2e/ref_torch.py" train "${M[@]}" --block-size "$T" \
        --steps "$steps" --threads 2 --blas-threads 2 --precision "$p" --json)
    at=$(field tokens_per_s <<<"$a") tt=$(field tokens_per_s <<<"$t")
    am=$(field peak_rss_kib <<<"$a") tm=$(field peak_rss_kib <<<"$t")
    "$PY" -c "print(f'| $T | $p | {$at:.0f} | {$tt:.0f} | {$at / $tt:.2f}x | {$am / 2**20:.1f} / {$tm / 2**20:.1f} |')"
  done
done
