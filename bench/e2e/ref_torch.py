"""PyTorch reference for `atto bench train|generate`: the same GPT, timed the same way.

    /usr/bin/python3 bench/e2e/ref_torch.py train --d-model 384 --n-heads 6 --n-layers 6 \
        --block-size 256 --batch-size 8 --threads 2 --blas-threads 2 --json
    /usr/bin/python3 bench/e2e/ref_torch.py generate --mode kvcache --d-model 128 --n-heads 4 \
        --n-layers 4 --block-size 64 --new-tokens 500 --json

Debian's python3-torch 1.13, eager mode, float32. The model is nanoGPT's model.py written with
plain torch.nn modules (nn.Linear, nn.Embedding, F.layer_norm, F.gelu) and nanoGPT's manual
attention (torch 1.13 has no F.scaled_dot_product_attention): q @ k^T * scale, masked_fill,
softmax, @ v. Same shapes and parameter names as atto's GPT (src/models/gpt.h), same GPT-2
initialisation (N(0, 0.02), residual projections N(0, 0.02 / sqrt(2 n_layer)), zero biases).

train: `warmup` untimed steps, then `steps` timed ones, each
    zero_grad(set_to_none=True), forward, F.cross_entropy, backward,
    clip_grad_norm_(1.0), AdamW(lr 1e-3, betas (0.9, 0.99), eps 1e-8, weight decay 0.1 on the
    weight matrices of Linear layers only, i.e. not on lm_head when it is tied to wte)
on [B, T = block_size] batches of uniform random tokens drawn before the clock starts (x =
seq[:, :T], y = seq[:, 1:]), as atto's bench_train.

generate: `warmup` untimed runs, then `steps` timed runs of new_tokens tokens for each of batch
one-token prompts, sampling softmax(logits) with torch.multinomial (temperature 1), no_grad,
eval mode. Two ways:
    nanogpt  nanoGPT's generate(): every token runs the whole prefix, cropped to the last
             block_size tokens (lm_head on the last position only, as nanoGPT).
    kvcache  a KV cache per layer, preallocated [B, NH, block_size, HS]; each token costs one
             position. When the cache is full it is rebuilt from the last max(1, block_size // 2)
             tokens, atto's policy (src/generate/generate.h), so both do the same work.
A run's time / new_tokens is one "ms per token" sample.

Threads: --threads sets torch.set_num_threads; --blas-threads sets OPENBLAS_NUM_THREADS (and
nothing else) before torch is imported. Peak resident memory is getrusage(RUSAGE_SELF).ru_maxrss
of this process (KiB), torch's import included; `rss_after_import_kib` tells that part.

--json prints one object with the keys of `atto bench ... --json` (step/token statistics,
tokens_per_s, peak_rss_kib, num_parameters, flop_parameters, losses).
"""

import argparse
import json
import math
import os
import resource
import sys
import time


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("what", choices=["train", "generate"])
    p.add_argument("--mode", choices=["nanogpt", "kvcache"], default="kvcache", help="generate only")
    p.add_argument("--vocab-size", type=int, default=65)
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--n-heads", type=int, default=4)
    p.add_argument("--n-layers", type=int, default=4)
    p.add_argument("--block-size", type=int, default=32)
    p.add_argument("--d-ff", type=int, default=0, help="0 = 4 * d-model")
    p.add_argument("--ffn", choices=["relu", "gelu", "gelu_tanh", "swiglu"], default="gelu")
    p.add_argument("--norm", choices=["layernorm", "rmsnorm"], default="layernorm")
    p.add_argument("--norm-placement", choices=["pre", "post"], default="pre")
    p.add_argument("--pos", choices=["learned", "sinusoidal"], default="learned")
    p.add_argument("--tie-weights", type=int, choices=[0, 1], default=1)
    p.add_argument("--bias", type=int, choices=[0, 1], default=1)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--lora-rank", type=int, default=0, help="train: LoRA adapters over frozen weights (PEFT's math)")
    p.add_argument("--lora-targets", default="qkv", help="qkv, proj, fc, fc2 (atto's names)")
    p.add_argument("--batch-size", type=int, default=None, help="train: 8, generate: 1")
    p.add_argument("--new-tokens", type=int, default=500)
    p.add_argument("--warmup", type=int, default=None, help="train: 3 steps, generate: 1 run")
    p.add_argument("--steps", type=int, default=None, help="train: 20 steps, generate: 5 runs")
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    p.add_argument("--blas-threads", type=int, default=None, help="OPENBLAS_NUM_THREADS (default: unset)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                   help="bf16: the forward (and so the backward) under torch.autocast('cpu', dtype=torch.bfloat16)")
    a = p.parse_args(argv)
    train = a.what == "train"
    a.batch_size = a.batch_size if a.batch_size is not None else (8 if train else 1)
    a.warmup = a.warmup if a.warmup is not None else (3 if train else 1)
    a.steps = a.steps if a.steps is not None else (20 if train else 5)
    if a.d_model % a.n_heads:
        p.error(f"--n-heads {a.n_heads} must divide --d-model {a.d_model}")
    if a.steps < 1 or a.warmup < 0 or a.batch_size < 1 or a.new_tokens < 1:
        p.error("--steps and --batch-size and --new-tokens must be >= 1, --warmup >= 0")
    return a


ARGS = parse_args(sys.argv[1:])
if ARGS.blas_threads is not None:  # read by OpenBLAS when torch loads it
    os.environ["OPENBLAS_NUM_THREADS"] = str(ARGS.blas_threads)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

RSS_AFTER_IMPORT = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


# ---- the model (nanoGPT's model.py, atto's options) ----------------------------------------

class LayerNorm(nn.Module):
    """nanoGPT's LayerNorm with an optional bias."""

    def __init__(self, ndim, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class RMSNorm(nn.Module):
    def __init__(self, ndim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * self.weight


def make_norm(cfg):
    return RMSNorm(cfg.d_model) if cfg.norm == "rmsnorm" else LayerNorm(cfg.d_model, cfg.bias)


class KVCache:
    """Per layer: k, v [B, NH, block_size, HS], filled up to `length`."""

    def __init__(self, cfg, B):
        hs = cfg.d_model // cfg.n_heads
        shape = (B, cfg.n_heads, cfg.block_size, hs)
        self.layers = [(torch.empty(shape), torch.empty(shape)) for _ in range(cfg.n_layers)]
        self.length = 0


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C = cfg.d_model
        self.c_attn = nn.Linear(C, 3 * C, bias=cfg.bias)
        self.c_proj = nn.Linear(C, C, bias=cfg.bias)
        self.attn_dropout = nn.Dropout(cfg.dropout)
        self.resid_dropout = nn.Dropout(cfg.dropout)
        self.n_head = cfg.n_heads
        T = cfg.block_size
        self.register_buffer("bias", torch.tril(torch.ones(T, T)).view(1, 1, T, T))

    def forward(self, x, kv=None, start=0):  # x [B, T, C]; kv: this layer's (k, v) cache
        B, T, C = x.size()
        NH, HS = self.n_head, C // self.n_head
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, NH, HS).transpose(1, 2)  # [B, NH, T, HS]
        k = k.view(B, T, NH, HS).transpose(1, 2)
        v = v.view(B, T, NH, HS).transpose(1, 2)
        if kv is not None:  # write positions start .. start+T-1, attend to 0 .. start+T-1
            kv[0][:, :, start:start + T] = k
            kv[1][:, :, start:start + T] = v
            k, v = kv[0][:, :, :start + T], kv[1][:, :, :start + T]
        Tk = k.size(2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(HS))  # [B, NH, T, Tk]
        att = att.masked_fill(self.bias[:, :, Tk - T:Tk, :Tk] == 0, float("-inf"))
        att = self.attn_dropout(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C, H = cfg.d_model, cfg.d_ff or 4 * cfg.d_model
        self.c_fc = nn.Linear(C, H, bias=cfg.bias)
        if cfg.ffn == "swiglu":
            self.c_fc2 = nn.Linear(C, H, bias=cfg.bias)
        self.c_proj = nn.Linear(H, C, bias=cfg.bias)
        self.dropout = nn.Dropout(cfg.dropout)
        self.ffn = cfg.ffn

    def forward(self, x):
        h = self.c_fc(x)
        if self.ffn == "gelu":
            h = F.gelu(h)
        elif self.ffn == "gelu_tanh":
            h = F.gelu(h, approximate="tanh")
        elif self.ffn == "relu":
            h = F.relu(h)
        else:
            h = F.silu(h) * self.c_fc2(x)
        return self.dropout(self.c_proj(h))


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.ln_1 = make_norm(cfg)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = make_norm(cfg)
        self.mlp = MLP(cfg)
        self.pre_norm = cfg.norm_placement == "pre"

    def forward(self, x, kv=None, start=0):
        if self.pre_norm:
            x = x + self.attn(self.ln_1(x), kv, start)
            return x + self.mlp(self.ln_2(x))
        x = self.ln_1(x + self.attn(x, kv, start))
        return self.ln_2(x + self.mlp(x))


def sinusoidal(T, C):
    pos = torch.arange(T, dtype=torch.float64)[:, None]
    div = torch.pow(10000.0, torch.arange(0, C, 2, dtype=torch.float64) / C)
    pe = torch.zeros(T, C, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(pos / div)
    pe[:, 1::2] = torch.cos(pos / div)[:, : C // 2]
    return pe.float()


class GPT(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        t = nn.ModuleDict(dict(wte=nn.Embedding(cfg.vocab_size, cfg.d_model), drop=nn.Dropout(cfg.dropout),
                               h=nn.ModuleList([Block(cfg) for _ in range(cfg.n_layers)])))
        if cfg.pos == "learned":
            t["wpe"] = nn.Embedding(cfg.block_size, cfg.d_model)
        else:
            self.register_buffer("pe", sinusoidal(cfg.block_size, cfg.d_model))
        if cfg.norm_placement == "pre":
            t["ln_f"] = make_norm(cfg)
        self.transformer = t
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        if cfg.tie_weights:
            self.transformer.wte.weight = self.lm_head.weight  # nanoGPT's weight tying
        self.apply(self._init_weights)
        for name, p in self.named_parameters():  # GPT-2: scaled residual projections
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layers))

    @staticmethod
    def _init_weights(m):
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)

    def flop_parameters(self):
        """Parameters in matrix products: all but the embedding lookups (atto's flop_parameters)."""
        n = sum(p.numel() for p in self.parameters())
        if "wpe" in self.transformer:
            n -= self.transformer.wpe.weight.numel()
        if not self.cfg.tie_weights:
            n -= self.transformer.wte.weight.numel()
        return n

    def forward(self, idx, targets=None, cache=None, last_only=False):
        B, T = idx.size()
        start = cache.length if cache is not None else 0
        x = self.transformer.wte(idx)
        if "wpe" in self.transformer:
            x = x + self.transformer.wpe(torch.arange(start, start + T, dtype=torch.long))
        else:
            x = x + self.pe[start:start + T]
        x = self.transformer.drop(x)
        for i, block in enumerate(self.transformer.h):
            x = block(x, cache.layers[i] if cache is not None else None, start)
        if cache is not None:
            cache.length += T
        if "ln_f" in self.transformer:
            x = self.transformer.ln_f(x)
        if targets is None:
            return self.lm_head(x[:, [-1], :] if last_only else x), None
        logits = self.lm_head(x)
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


class LoraLinear(nn.Module):
    """PEFT's LoRA around a frozen nn.Linear: base(x) + (alpha / r) * B(A(x)), A kaiming-uniform, B 0."""

    def __init__(self, base, r):
        super().__init__()
        self.base, self.scale = base, 1.0  # alpha = r, as atto's default
        self.lora_A = nn.Linear(base.in_features, r, bias=False)
        self.lora_B = nn.Linear(r, base.out_features, bias=False)
        nn.init.kaiming_uniform_(self.lora_A.weight, a=math.sqrt(5))
        nn.init.zeros_(self.lora_B.weight)

    def forward(self, x):
        return self.base(x) + self.lora_B(self.lora_A(x)) * self.scale


def add_lora(model, r, targets):
    """Freezes every parameter, then wraps the target layers of each block (atto's --lora-targets)."""
    for p in model.parameters():
        p.requires_grad_(False)
    where = {"qkv": ("attn", "c_attn"), "proj": ("attn", "c_proj"), "fc": ("mlp", "c_fc"), "fc2": ("mlp", "c_proj")}
    for block in model.transformer.h:
        for t in targets.split(","):
            parent, name = where[t]
            sub = getattr(block, parent)
            setattr(sub, name, LoraLinear(getattr(sub, name), r))


def param_groups(model, weight_decay):
    """atto's default_param_groups: decay the Linear weight matrices, not an embedding; trainable only."""
    wte = model.transformer.wte.weight
    decay = [m.weight for m in model.modules()
             if isinstance(m, nn.Linear) and m.weight is not wte and m.weight.requires_grad]
    ids = {id(p) for p in decay}
    rest = [p for p in model.parameters() if id(p) not in ids and p.requires_grad]
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


# ---- measurements ---------------------------------------------------------------------------

def stats(ms):
    ms = np.asarray(ms, dtype=np.float64)
    return {"count": int(ms.size), "median_ms": float(np.quantile(ms, 0.5)), "p10_ms": float(np.quantile(ms, 0.1)),
            "p90_ms": float(np.quantile(ms, 0.9)), "mean_ms": float(ms.mean()), "min_ms": float(ms.min()),
            "max_ms": float(ms.max())}


def autocast(a):
    """PyTorch's mixed precision on the CPU (bf16 matmuls, fp32 weights), or nothing for fp32."""
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.precision == "bf16")


def bench_train(model, a):
    B, T, V = a.batch_size, a.block_size, a.vocab_size
    gen = torch.Generator().manual_seed(a.seed)
    batches = [torch.randint(V, (B, T + 1), generator=gen) for _ in range(a.warmup + a.steps)]
    batches = [(s[:, :-1].contiguous(), s[:, 1:].contiguous()) for s in batches]
    opt = torch.optim.AdamW(param_groups(model, 0.1), lr=1e-3, betas=(0.9, 0.99), eps=1e-8)
    model.train()
    losses, ms = [], []
    for i, (x, y) in enumerate(batches):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with autocast(a):
            _, loss = model(x, y)
        losses.append(loss.item())
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], 1.0)
        opt.step()
        if i >= a.warmup:
            ms.append((time.perf_counter() - t0) * 1e3)
    s = stats(ms)
    return {"step": s, "tokens_per_step": B * T, "tokens_per_s": B * T / (s["median_ms"] / 1e3), "losses": losses}


def draw(logits, gen):
    probs = F.softmax(logits[:, -1, :], dim=-1)
    return torch.multinomial(probs, num_samples=1, generator=gen)  # [B, 1]


def generate_nanogpt(model, idx, n, gen):
    block = model.cfg.block_size
    for _ in range(n):
        idx_cond = idx if idx.size(1) <= block else idx[:, -block:]
        logits, _ = model(idx_cond, last_only=True)
        idx = torch.cat((idx, draw(logits, gen)), dim=1)
    return idx


def generate_kvcache(model, idx, n, gen):
    block, B = model.cfg.block_size, idx.size(0)
    keep = max(1, block // 2)  # atto's reencode_length
    cache = KVCache(model.cfg, B)
    logits, _ = model(idx, cache=cache, last_only=True)
    for s in range(n):
        idx = torch.cat((idx, draw(logits, gen)), dim=1)
        if s + 1 == n:
            break
        if cache.length == block:  # full: rebuild from the last `keep` tokens
            cache.length = 0
            logits, _ = model(idx[:, -keep:], cache=cache, last_only=True)
        else:
            logits, _ = model(idx[:, -1:], cache=cache, last_only=True)
    return idx


def bench_generate(model, a):
    gen = torch.Generator().manual_seed(a.seed)
    prompt = torch.randint(a.vocab_size, (a.batch_size, 1), generator=gen)
    run = generate_kvcache if a.mode == "kvcache" else generate_nanogpt
    model.eval()
    ms, generated = [], 0
    with torch.no_grad(), autocast(a):
        for i in range(a.warmup + a.steps):
            t0 = time.perf_counter()
            out = run(model, prompt, a.new_tokens, gen)
            dt = (time.perf_counter() - t0) * 1e3
            generated = (out.size(1) - 1) * out.size(0)
            if i >= a.warmup:
                ms.append(dt / a.new_tokens)
    s = stats(ms)
    return {"token": s, "tokens_per_s": a.batch_size / (s["median_ms"] / 1e3), "generated": generated}


def main(a):
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    model = GPT(a)
    if a.lora_rank > 0:
        add_lora(model, a.lora_rank, a.lora_targets)
    r = bench_train(model, a) if a.what == "train" else bench_generate(model, a)
    r.update({
        "peak_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        "rss_after_import_kib": RSS_AFTER_IMPORT,
        "num_parameters": sum(p.numel() for p in model.parameters()),
        "trainable_parameters": sum(p.numel() for p in model.parameters() if p.requires_grad),
        "flop_parameters": model.flop_parameters(),
        "threads": torch.get_num_threads(),
        "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
        "torch": torch.__version__,
        "precision": a.precision,
    })
    if a.json:
        print(json.dumps(r))
        return
    key = "step" if a.what == "train" else "token"
    s = r[key]
    print(f"torch {a.what}{' (' + a.mode + ')' if a.what == 'generate' else ''}: {r['num_parameters']} parameters, "
          f"{r['threads']} threads, OPENBLAS_NUM_THREADS={r['blas_threads']}")
    print(f"{'per ' + key:<12} median {s['median_ms']:.3f} ms   p10 {s['p10_ms']:.3f} ms   "
          f"p90 {s['p90_ms']:.3f} ms   ({s['count']} timed)")
    print(f"{'throughput':<12} {r['tokens_per_s']:.0f} tokens/s")
    print(f"{'memory':<12} {r['peak_rss_kib'] / 1024:.1f} MiB peak resident "
          f"({RSS_AFTER_IMPORT / 1024:.1f} MiB after import)")


if __name__ == "__main__":
    main(ARGS)
