#!/usr/bin/env python3
"""atto against llama.cpp on the same GGUF file: prompt processing and greedy generation.

    bench/llamacpp/run.py [--configs c,d] [--types f32,q8_0] [--rounds 2]
    bench/llamacpp/run.py --configs d,g --types f32,q8_0,q4_0      # the quantized comparison

For each configuration of bench/e2e ((c) d128 L4 T64, (d) d384 L6 T256; and (g) d768 L8 T256, 57M
parameters, a model of the size users deploy; vocabulary: the characters
of tinyshakespeare, or of a generated text when ../shared is absent) a GPT with its initial
weights is written as a run directory (`atto train --steps 1`) and exported to GGUF (`atto
export`), then measured by

  - atto:      `atto bench generate --model FILE.gguf --prompt-tokens T-1 --new-tokens T-2 --greedy`
               (q8_0 and q4_0 matrices stay quantized and run on the integer kernels; 2 threads)
  - llama.cpp: `node tests/gguf/llama_ref.mjs bench` (npm's node-llama-cpp, its prebuilt CPU
               llama.cpp; f32 KV cache, no flash attention) with 1 and 2 threads, the better kept

alternately, `--rounds` times, each side's best round kept. Prompt processing is one forward of
T-1 tokens (llama.cpp refuses positions past the model's context, so the issue's 512-token
prompt and 500 new tokens do not fit these models: T-1 and T-2 are the longest that do);
generation is T-2 greedy tokens after a one-token prompt, batch 1. llama.cpp's figures include
node-llama-cpp's JavaScript (one call per token while generating); its prompt-only run shows the
cost of returning logits. The last column is the peak resident memory of `atto sample` on the
file (8 new tokens): what a user's process takes for the model.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = {"c": dict(d_model=128, n_layers=4, n_heads=4, block_size=64),
           "d": dict(d_model=384, n_layers=6, n_heads=6, block_size=256),
           "g": dict(d_model=768, n_layers=8, n_heads=12, block_size=256)}


def run_json(cmd, env=None):
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        sys.exit(f"run.py: {' '.join(map(str, cmd))} failed ({out.returncode}): {out.stderr.strip()[-2000:]}")
    return json.loads(out.stdout)


def make_gguf(a, name, cfg, work, data):
    run = work / f"run_{name}"
    subprocess.run([a.atto, "train", "--data", data, "--mode", "stream", "--out", run, "--force", "--steps", "1",
                    "--d-model", str(cfg["d_model"]), "--n-layers", str(cfg["n_layers"]), "--n-heads",
                    str(cfg["n_heads"]), "--block-size", str(cfg["block_size"]), "--batch-size", "2",
                    "--ffn", "gelu_tanh", "--eval-batches", "1", "-q"], check=True, stdout=subprocess.DEVNULL)
    files = {}
    for t in a.types:
        files[t] = work / f"{name}.{t}.gguf"
        subprocess.run([a.atto, "export", "--model", run, "--format", "gguf", "--type", t, "--out", files[t]],
                       check=True, stdout=subprocess.DEVNULL)
    return files


def atto_round(a, gguf, T):
    r = run_json([a.atto, "bench", "generate", "--model", gguf, "--prompt-tokens", str(T - 1), "--new-tokens",
                  str(T - 2), "--greedy", "--threads", str(a.atto_threads), "--warmup", "1", "--steps",
                  str(a.reps), "--json"])
    return {"prompt": r["prompt_tokens_per_s"], "gen": r["tokens_per_s"]}


def sample_rss_mb(a, gguf):
    """Peak resident memory (MB) of `atto sample` generating 8 tokens from the file."""
    p = subprocess.Popen([a.atto, "sample", "--model", gguf, "-n", "1", "--max-tokens", "8", "--seed", "1",
                          "--threads", str(a.atto_threads)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    if status != 0:
        sys.exit(f"run.py: atto sample --model {gguf} failed: {p.stderr.read().decode()[-2000:]}")
    return usage.ru_maxrss / 1024


def llama_round(a, gguf, T, env):
    best = {}
    for th in a.llama_threads:
        ref = ["node", ROOT / "tests/gguf/llama_ref.mjs", "bench", "--model", gguf, "--threads", str(th),
               "--reps", str(a.reps)]
        p = run_json(ref + ["--prompt-tokens", str(T - 1), "--gen-tokens", "1"], env)
        g = run_json(ref + ["--prompt-tokens", "2", "--gen-tokens", str(T - 2)], env)
        for key, v in (("prompt", p["prompt_tok_per_s"]), ("prompt_logits", p["prompt_logits_tok_per_s"]),
                       ("gen", g["gen_tok_per_s"])):
            best[f"{key}@{th}"] = v
    return best


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--atto", default=str(ROOT / "build/atto"))
    p.add_argument("--node-dir", default=str(ROOT / "build/node"), help="where tests/gguf/install.sh installs")
    p.add_argument("--configs", default="c,d")
    p.add_argument("--types", default="f32,q8_0")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--reps", type=int, default=5, help="timed repetitions inside each measurement")
    p.add_argument("--atto-threads", type=int, default=2)
    p.add_argument("--llama-threads", default="1,2")
    a = p.parse_args()
    a.types = a.types.split(",")
    a.llama_threads = [int(t) for t in a.llama_threads.split(",")]
    subprocess.run(["bash", ROOT / "tests/gguf/install.sh", a.node_dir], check=True, stdout=subprocess.DEVNULL)
    env = dict(os.environ, NODE_PATH=str(Path(a.node_dir) / "node_modules"))
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data = ROOT.parent / "shared/data/tinyshakespeare.txt"
        if not data.exists():
            data = work / "text.txt"
            data.write_text("".join(f"the quick brown fox {i % 97} jumps over the lazy dog.\n" for i in range(3000)))
        rows = []
        for name in a.configs.split(","):
            cfg = CONFIGS[name]
            T = cfg["block_size"]
            files = make_gguf(a, name, cfg, work, str(data))
            for t in a.types:
                at, ll = {}, {}
                for _ in range(a.rounds):
                    for k, v in atto_round(a, files[t], T).items():
                        at[k] = max(at.get(k, 0.0), v)
                    for k, v in llama_round(a, files[t], T, env).items():
                        ll[k] = max(ll.get(k, 0.0), v)
                at["rss"] = sample_rss_mb(a, files[t])
                rows.append((name, t, T, at, ll))
                print(f"({name}) {t}: atto {at}  llama.cpp {ll}", flush=True)
    print(f"\n== atto against llama.cpp (node-llama-cpp) on one GGUF, best of {a.rounds} alternating rounds; {cpu}")
    print(f"{'cfg':<4} {'type':<5} {'prompt':>7} {'atto pp/s':>10} {'llama pp/s':>15} {'ratio':>6} "
          f"{'atto gen/s':>10} {'llama gen/s':>15} {'ratio':>6} {'sample RSS MB':>13}")
    for name, t, T, at, ll in rows:
        pp_key = max((k for k in ll if k.startswith("prompt@")), key=lambda k: ll[k])
        gen_key = max((k for k in ll if k.startswith("gen@")), key=lambda k: ll[k])
        print(f"({name}) {t:<5} {T - 1:>7} {at['prompt']:>10.0f} {ll[pp_key]:>9.0f} ({pp_key.split('@')[1]}t) "
              f"{at['prompt'] / ll[pp_key]:>6.2f} {at['gen']:>10.0f} {ll[gen_key]:>9.0f} ({gen_key.split('@')[1]}t) "
              f"{at['gen'] / ll[gen_key]:>6.2f} {at['rss']:>13.0f}")
        others = ", ".join(f"{k} {v:.0f}" for k, v in sorted(ll.items()))
        print(f"      llama.cpp, every setting: {others}")


if __name__ == "__main__":
    main()
