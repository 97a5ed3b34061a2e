"""atto against PyTorch, side by side: training and generation speed on the same GPTs.

    bench/e2e/run.sh                      # the full comparison (tens of minutes on 2 cores)
    bench/e2e/run.sh --smoke              # a few steps of everything: checks that it runs
    bench/e2e/run.sh --configs a,d --rounds 3 --json-out results.json

Every measurement runs in its own process (`atto bench train|generate|gemm --json`, or
`ref_torch.py train|generate --json`), so each peak resident memory (ru_maxrss) is that of one
measurement. Within a round the processes alternate: for each configuration atto, then PyTorch
at every thread setting, then the next configuration; with several rounds, slow drifts of the
machine's load hit both sides alike. A number in the table is the best over rounds (and, for
PyTorch, over its thread settings: torch.set_num_threads 1 and 2 x OPENBLAS_NUM_THREADS 1 and 2)
of each process's median step; the thread setting that won is printed. atto uses --atto-threads
(default 2, both cores).

The sgemm peak is `atto bench gemm` (1024^3, atto's threads), measured once per round; MFU is
model FLOP/s (6 N + 12 L C T per token, see docs/bench.md) over the best of those peaks.
Nothing here asserts a timing: the exit status is non-zero only when a process fails.
"""

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# Vocabulary 65, pre-norm GPT, GELU, learned positions, tied embeddings, dropout 0.
CONFIGS = {
    "a": dict(d_model=32, n_layers=4, n_heads=4, block_size=16, batch_size=64),
    "b": dict(d_model=64, n_layers=4, n_heads=4, block_size=32, batch_size=32),
    "c": dict(d_model=128, n_layers=4, n_heads=4, block_size=64, batch_size=12),
    "d": dict(d_model=384, n_layers=6, n_heads=6, block_size=256, batch_size=8),
}
GEN_CONFIGS = ["c", "d"]
VOCAB = 65


def parse_args(argv):
    p = argparse.ArgumentParser(description="atto vs PyTorch, side by side")
    p.add_argument("--atto", default=os.environ.get("ATTO_BIN", "build/atto"), help="the atto binary")
    p.add_argument("--baseline", default=None,
                   help="an older atto binary: each atto measurement is repeated with it right after, and a table "
                        "compares the two (a change's before and after, from one run)")
    p.add_argument("--python", default=os.environ.get("ATTO_PYTHON", "/usr/bin/python3"),
                   help="a python with torch (Debian's python3-torch)")
    p.add_argument("--smoke", action="store_true", help="a few steps of everything (CI): checks that it runs")
    p.add_argument("--configs", default="a,b,c,d", help="training configurations to run")
    p.add_argument("--gen-configs", default=",".join(GEN_CONFIGS), help="generation configurations ('' = none)")
    p.add_argument("--rounds", type=int, default=None, help="alternating rounds (default 2; smoke 1)")
    p.add_argument("--warmup", type=int, default=None, help="untimed training steps (default 3; smoke 1)")
    p.add_argument("--steps", type=int, default=None, help="timed training steps (default 20; smoke 2)")
    p.add_argument("--new-tokens", type=int, default=None, help="tokens per generation run (default 500; smoke 40)")
    p.add_argument("--gen-runs", type=int, default=None,
                   help="timed generation runs with a KV cache (default 3, after 1 untimed; smoke 1, none untimed); "
                        "nanoGPT-style generation, ~block_size times slower, gets 1 timed run and no untimed one")
    p.add_argument("--atto-threads", type=int, default=2)
    p.add_argument("--torch-threads", default=None,
                   help="torch thread settings to try, THREADS:OPENBLAS_THREADS comma-separated "
                        "(default 1:1,1:2,2:1,2:2; smoke 1:1)")
    p.add_argument("--gemm-size", type=int, default=None, help="sgemm peak matrix size (default 1024; smoke 256)")
    p.add_argument("--json-out", default=None, help="also write every raw measurement to this file")
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                   help="bf16: atto --precision bf16 against torch.autocast('cpu', dtype=torch.bfloat16); atto fp32 "
                        "is measured too (the bf16/fp32 column)")
    a = p.parse_args(argv)
    full = not a.smoke
    a.rounds = a.rounds or (2 if full else 1)
    a.warmup = a.warmup if a.warmup is not None else (3 if full else 1)
    a.steps = a.steps or (20 if full else 2)
    a.new_tokens = a.new_tokens or (500 if full else 40)
    a.gen_runs = a.gen_runs or (3 if full else 1)
    a.gen_warmup = 1 if full else 0
    a.gemm_size = a.gemm_size or (1024 if full else 256)
    a.torch_threads = [tuple(int(x) for x in s.split(":")) for s in
                       (a.torch_threads or ("1:1,1:2,2:1,2:2" if full else "1:1")).split(",")]
    a.configs = [c for c in a.configs.split(",") if c]
    a.gen_configs = [c for c in a.gen_configs.split(",") if c]
    for c in a.configs + a.gen_configs:
        if c not in CONFIGS:
            p.error(f"unknown configuration '{c}' (known: {', '.join(CONFIGS)})")
    return a


def model_flags(cfg, torch_side):
    """Model flags of one configuration, for `atto bench` or ref_torch.py."""
    f = ["--vocab-size", VOCAB, "--d-model", cfg["d_model"], "--n-layers", cfg["n_layers"],
         "--n-heads", cfg["n_heads"], "--block-size", cfg["block_size"], "--ffn", "gelu", "--norm", "layernorm",
         "--norm-placement", "pre", "--pos", "learned", "--dropout", 0]
    f += ["--tie-weights", 1, "--bias", 1] if torch_side else ["--tie-weights", "--bias"]
    return [str(x) for x in f]


def run_json(cmd, env=None):
    """Runs one measurement process; returns its JSON line. Raises with its stderr on failure."""
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"command failed (exit {p.returncode}): {' '.join(cmd)}\n{p.stderr.strip()}")
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        raise RuntimeError(f"no JSON from: {' '.join(cmd)}\n{p.stdout}\n{p.stderr}")
    r = json.loads(lines[-1])
    r["wall_s"] = time.time() - t0
    return r


class Bench:
    def __init__(self, a):
        self.a = a
        self.ref = [a.python, os.path.join(HERE, "ref_torch.py")]
        self.raw = []  # every measurement: dict(kind, config, side, threads, result)

    def log(self, msg):
        print(msg, file=sys.stderr, flush=True)

    def record(self, kind, config, side, threads, result):
        self.raw.append(dict(kind=kind, config=config, side=side, threads=threads, result=result))

    def gemm(self):
        a = self.a
        r = run_json([a.atto, "bench", "gemm", "--size", str(a.gemm_size), "--threads", str(a.atto_threads),
                      "--precision", a.precision, "--json"] +
                     (["--warmup", "1", "--steps", "3", "--fma-seconds", "0.05"] if a.smoke else []))
        self.record("gemm", "-", "atto", str(a.atto_threads), r)
        self.log(f"  sgemm {a.gemm_size}^3: {r['best_gflops']:.1f} GFLOP/s best, {r['median_gflops']:.1f} median; "
                 f"FMA ceiling {r.get('fma_gflops', 0.0):.1f} GFLOP/s")
        if r.get("bf16"):
            self.log(f"  bf16 gemm ({r['bf16']['kernel']}): {r['bf16']['best_gflops']:.1f} GFLOP/s best; "
                     f"bf16 ceiling {r['bf16']['peak_gflops']:.1f} GFLOP/s")

    def train(self, name):
        a, cfg = self.a, CONFIGS[name]
        steps = ["--warmup", str(a.warmup), "--steps", str(a.steps), "--batch-size", str(cfg["batch_size"])]
        for side, binary, precision in self.attos():
            r = run_json([binary, "bench", "train", *model_flags(cfg, False), *steps, "--threads", str(a.atto_threads),
                          "--peak-gflops", "-1", "--precision", precision, "--json"])
            self.record("train", name, side, str(a.atto_threads), r)
            self.log(f"  ({name}) train {side}  {a.atto_threads} threads: {r['tokens_per_s']:9.0f} tokens/s")
        for t, blas in a.torch_threads:
            r = run_json([*self.ref, "train", *model_flags(cfg, True), *steps, "--threads", str(t),
                          "--blas-threads", str(blas), "--precision", a.precision, "--json"])
            self.record("train", name, "torch", f"{t}:{blas}", r)
            self.log(f"  ({name}) train torch {t}:{blas}:       {r['tokens_per_s']:9.0f} tokens/s")

    def generate(self, name):
        a, cfg = self.a, CONFIGS[name]
        common = ["--batch-size", "1", "--new-tokens", str(a.new_tokens)]
        kv_runs = ["--warmup", str(a.gen_warmup), "--steps", str(a.gen_runs)]
        for side, binary, precision in self.attos():
            r = run_json([binary, "bench", "generate", *model_flags(cfg, False), *common, *kv_runs,
                          "--threads", str(a.atto_threads), "--precision", precision, "--json"])
            self.record("generate", name, side, str(a.atto_threads), r)
            self.log(f"  ({name}) generate {side}:          {r['tokens_per_s']:9.1f} tokens/s")
        for mode in ("kvcache", "nanogpt"):
            runs = kv_runs if mode == "kvcache" else ["--warmup", "0", "--steps", "1"]
            for t, blas in a.torch_threads:
                r = run_json([*self.ref, "generate", "--mode", mode, *model_flags(cfg, True), *common, *runs,
                              "--threads", str(t), "--blas-threads", str(blas), "--precision", a.precision, "--json"])
                self.record("generate", name, f"torch-{mode}", f"{t}:{blas}", r)
                self.log(f"  ({name}) generate torch {mode} {t}:{blas}: {r['tokens_per_s']:9.1f} tokens/s")

    def attos(self):
        """The atto measurements, in order: this binary, atto in fp32 (with --precision bf16), the baseline."""
        a = self.a
        return ([("atto", a.atto, a.precision)] + ([("atto-fp32", a.atto, "fp32")] if a.precision == "bf16" else []) +
                ([("baseline", a.baseline, a.precision)] if a.baseline else []))

    def run(self):
        for rnd in range(self.a.rounds):
            self.log(f"round {rnd + 1}/{self.a.rounds}")
            self.gemm()
            for name in self.a.configs:
                self.train(name)
            for name in self.a.gen_configs:
                self.generate(name)

    def best(self, kind, config, side):
        """The fastest measurement (highest tokens/s) of one side over rounds and thread settings."""
        rs = [m for m in self.raw if m["kind"] == kind and m["config"] == config and m["side"] == side]
        return max(rs, key=lambda m: m["result"]["tokens_per_s"]) if rs else None


def load_average():
    try:
        with open("/proc/loadavg") as f:
            return " / ".join(f.read().split()[:3])
    except OSError:
        return "?"


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"


def mib(kib):
    return f"{kib / 1024:.0f} MiB"


def spread(s):
    return f"{s['median_ms']:.2f} [{s['p10_ms']:.2f} .. {s['p90_ms']:.2f}]"


def describe(cfg):
    return f"L{cfg['n_layers']} C{cfg['d_model']} H{cfg['n_heads']} T{cfg['block_size']}"


def print_header(b, load_start, load_end):
    a = b.a
    bf16 = a.precision == "bf16"
    peaks = [m["result"]["bf16"]["best_gflops"] if bf16 else m["result"]["best_gflops"]
             for m in b.raw if m["kind"] == "gemm"]
    what = "atto --precision bf16 vs PyTorch eager under torch.autocast('cpu', dtype=torch.bfloat16)" if bf16 else \
        "atto vs PyTorch (eager, fp32)"
    print(f"{what}, {'SMOKE (timings meaningless)' if a.smoke else 'full run'}")
    print(f"machine: {cpu_name()}, {os.cpu_count()} cores; load average (1/5/15 min) at start {load_start}, "
          f"at end {load_end}")
    torch_v = next((m["result"].get("torch") for m in b.raw if m["side"].startswith("torch")), "?")
    print(f"torch {torch_v} at {a.python}; atto {a.atto}, threads {a.atto_threads}; torch threads tried "
          f"(set_num_threads:OPENBLAS_NUM_THREADS) {', '.join(f'{t}:{o}' for t, o in a.torch_threads)}")
    env = {k: os.environ[k] for k in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS", "GOMP_SPINCOUNT", "OPENBLAS_CORETYPE")
           if k in os.environ}
    print("environment of both sides: " + (", ".join(f"{k}={v}" for k, v in env.items()) or
                                           "no OpenMP or OpenBLAS variables set"))
    print(f"each figure: the best of {a.rounds} round(s) of the median of one process's timed steps "
          f"({a.steps} training steps after {a.warmup} untimed)")
    fma = [m["result"].get("fma_gflops", 0.0) for m in b.raw if m["kind"] == "gemm"]
    if peaks and bf16:
        g = [m["result"]["bf16"] for m in b.raw if m["kind"] == "gemm"]
        print(f"bf16 GEMM peak (atto bench gemm --precision bf16 {a.gemm_size}^3, {g[0]['kernel']} kernel, best of "
              f"{len(peaks)}): {max(peaks):.1f} GFLOP/s (MFU is against it); the bf16 units' ceiling: "
              f"{max(x['peak_gflops'] for x in g):.1f} GFLOP/s; the fp32 FMA ceiling: {max(fma):.1f} GFLOP/s")
    elif peaks:
        print(f"sgemm peak (atto bench gemm {a.gemm_size}^3, best of {len(peaks)}): {max(peaks):.1f} GFLOP/s; "
              f"the cores' FMA ceiling (fma peak, best of {len(fma)}): {max(fma):.1f} GFLOP/s")
    return max(peaks) if peaks else 0.0


def print_train_table(b, peak):
    if not b.a.configs:
        return
    print()
    print("== training: tokens/s (higher is better), vocabulary 65, pre-norm GELU, learned positions, tied")
    print(f"{'cfg':<4} {'model':<18} {'B':>3} {'atto tok/s':>11} {'torch tok/s':>12} {'thr':>4} {'atto/torch':>10} "
          f"{'atto MFU':>8} {'torch MFU':>9} {'atto RSS':>9} {'torch RSS':>9}")
    for name in b.a.configs:
        at, to = b.best("train", name, "atto"), b.best("train", name, "torch")
        ar, tr = at["result"], to["result"]
        flops = ar["flops_per_token"]
        mfu = (lambda tps: f"{100 * flops * tps / (peak * 1e9):.1f}%" if peak > 0 else "-")
        print(f"({name}) {describe(CONFIGS[name]):<18} {CONFIGS[name]['batch_size']:>3} {ar['tokens_per_s']:>11.0f} "
              f"{tr['tokens_per_s']:>12.0f} {to['threads']:>4} {ar['tokens_per_s'] / tr['tokens_per_s']:>10.2f} "
              f"{mfu(ar['tokens_per_s']):>8} {mfu(tr['tokens_per_s']):>9} {mib(ar['peak_rss_kib']):>9} "
              f"{mib(tr['peak_rss_kib']):>9}")
        if ar["num_parameters"] != tr["num_parameters"]:
            print(f"    WARNING: parameter counts differ: atto {ar['num_parameters']}, torch {tr['num_parameters']}")
    print("step time, ms: median [p10 .. p90] of the kept process; first loss (ln 65 = 4.174)")
    for name in b.a.configs:
        at, to = b.best("train", name, "atto"), b.best("train", name, "torch")
        print(f"({name}) atto {spread(at['result']['step'])}  loss {at['result']['losses'][0]:.3f}   "
              f"torch {spread(to['result']['step'])}  loss {to['result']['losses'][0]:.3f}")


def print_generate_table(b):
    if not b.a.gen_configs:
        return
    print()
    print(f"== generation: tokens/s, batch 1, {b.a.new_tokens} new tokens; atto with its KV cache against torch "
          f"with a KV cache and nanoGPT-style (whole prefix, cropped to the block)")
    print(f"{'cfg':<4} {'model':<18} {'atto tok/s':>10} {'torch KV':>9} {'thr':>4} {'atto/KV':>8} {'nanoGPT':>8} "
          f"{'thr':>4} {'atto/nano':>9} {'atto RSS':>9} {'KV RSS':>8} {'nano RSS':>8}")
    for name in b.a.gen_configs:
        at = b.best("generate", name, "atto")
        kv = b.best("generate", name, "torch-kvcache")
        ng = b.best("generate", name, "torch-nanogpt")
        ar, kr, nr = at["result"], kv["result"], ng["result"]
        print(f"({name}) {describe(CONFIGS[name]):<18} {ar['tokens_per_s']:>10.1f} {kr['tokens_per_s']:>9.1f} "
              f"{kv['threads']:>4} {ar['tokens_per_s'] / kr['tokens_per_s']:>8.2f} {nr['tokens_per_s']:>8.1f} "
              f"{ng['threads']:>4} {ar['tokens_per_s'] / nr['tokens_per_s']:>9.2f} {mib(ar['peak_rss_kib']):>9} "
              f"{mib(kr['peak_rss_kib']):>8} {mib(nr['peak_rss_kib']):>8}")
    print("time per token, ms: median [p10 .. p90] over the kept process's runs")
    for name in b.a.gen_configs:
        r = [b.best("generate", name, side)["result"]["token"] for side in ("atto", "torch-kvcache", "torch-nanogpt")]
        print(f"({name}) atto {spread(r[0])}   torch KV {spread(r[1])}   torch nanoGPT {spread(r[2])}")


def print_fp32_table(b):
    if b.a.precision != "bf16":
        return
    print()
    print("== atto --precision bf16 against atto fp32 (the same binary, run alternately): tokens/s")
    print(f"{'':<9} {'cfg':<4} {'model':<18} {'bf16':>10} {'fp32':>10} {'bf16/fp32':>10} {'bf16 RSS':>9} "
          f"{'fp32 RSS':>9}")
    for kind, names in (("train", b.a.configs), ("generate", b.a.gen_configs)):
        for name in names:
            new, old = b.best(kind, name, "atto")["result"], b.best(kind, name, "atto-fp32")["result"]
            print(f"{kind:<9} ({name}) {describe(CONFIGS[name]):<18} {new['tokens_per_s']:>10.1f} "
                  f"{old['tokens_per_s']:>10.1f} {new['tokens_per_s'] / old['tokens_per_s']:>10.2f} "
                  f"{mib(new['peak_rss_kib']):>9} {mib(old['peak_rss_kib']):>9}")
    for name in b.a.configs:
        new, old = b.best("train", name, "atto")["result"], b.best("train", name, "atto-fp32")["result"]
        print(f"({name}) losses of the same steps, bf16 - fp32: first {new['losses'][0] - old['losses'][0]:+.4f}, "
              f"last {new['losses'][-1] - old['losses'][-1]:+.4f}")


def print_baseline_table(b):
    if not b.a.baseline:
        return
    print()
    print(f"== atto against the baseline binary {b.a.baseline} (run alternately, each the best of {b.a.rounds} "
          f"round(s)): tokens/s")
    print(f"{'':<9} {'cfg':<4} {'model':<18} {'atto':>10} {'baseline':>10} {'atto/baseline':>13}")
    for kind, names in (("train", b.a.configs), ("generate", b.a.gen_configs)):
        for name in names:
            new, old = b.best(kind, name, "atto")["result"], b.best(kind, name, "baseline")["result"]
            print(f"{kind:<9} ({name}) {describe(CONFIGS[name]):<18} {new['tokens_per_s']:>10.1f} "
                  f"{old['tokens_per_s']:>10.1f} {new['tokens_per_s'] / old['tokens_per_s']:>13.3f}")


def same_openblas_kernels(atto):
    """Both sides' OpenBLAS on the kernels atto runs. An OpenBLAS older than the CPU falls back to
    its Prescott kernels, and atto then restarts itself with OPENBLAS_CORETYPE set (apps/atto/main.cpp);
    PyTorch's fp32 work goes through the same OpenBLAS, so it gets the same setting."""
    if "OPENBLAS_CORETYPE" in os.environ:
        return
    p = subprocess.run([atto, "--version"], capture_output=True, text=True,
                       env=dict(os.environ, OPENBLAS_VERBOSE="2"))
    cores = [ln.split("Core:", 1)[1].strip() for ln in (p.stdout + p.stderr).splitlines() if "Core:" in ln]
    if cores:
        os.environ["OPENBLAS_CORETYPE"] = cores[-1]


def main(argv):
    a = parse_args(argv)
    if not os.access(a.atto, os.X_OK):
        sys.exit(f"run.py: no atto binary at {a.atto}: build it (scripts/build) or pass --atto PATH")
    same_openblas_kernels(a.atto)
    if a.baseline and not os.access(a.baseline, os.X_OK):
        sys.exit(f"run.py: no baseline binary at {a.baseline}")
    b = Bench(a)
    load_start = load_average()
    try:
        b.run()
    except RuntimeError as e:
        sys.exit(f"run.py: {e}")
    load_end = load_average()
    peak = print_header(b, load_start, load_end)
    print_train_table(b, peak)
    print_generate_table(b)
    print_fp32_table(b)
    print_baseline_table(b)
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(dict(args={k: v for k, v in vars(a).items()}, load_start=load_start, load_end=load_end,
                           cpu=cpu_name(), sgemm_peak_gflops=peak, measurements=b.raw), f, indent=1)
        print(f"\nraw measurements: {a.json_out}")


if __name__ == "__main__":
    main(sys.argv[1:])
