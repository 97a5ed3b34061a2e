"""PyTorch reference for tests/parity/test_parity_gpt.cpp: a nanoGPT-style GPT that loads atto's
model.safetensors without renaming, then forward, backward and a few AdamW steps.

    /usr/bin/python3 ref_gpt.py --case default --out ref.safetensors \
        --weights model.safetensors --batch batch.safetensors \
        --vocab 13 --block 8 --n-layer 2 --n-head 2 --n-embd 16 --d-ff 64 \
        --activation gelu --norm layernorm --pre-norm 1 --bias 1 --tie 1 --pos learned \
        --norm-eps 1e-5 --steps 10 --lr 1e-3 --beta1 0.9 --beta2 0.99 --adam-eps 1e-8 \
        --weight-decay 0.1 --max-norm 1.0

The direction is atto -> PyTorch: atto writes the weights (its GPT-2 initialisation) with
save_model_weights and the batch (idx, targets [B, T], integers stored as floats, -1 = ignored);
this script builds the model from torch primitives (torch 1.13 has no nn.RMSNorm and we do not
use F.scaled_dot_product_attention), loads the file with load_state_dict(strict=True) and
computes everything in float64, so the differences are atto's float32 rounding.

Model (mirrors src/models/gpt.h and src/nn/blocks.h):
    x = wte(idx) + pos                    learned wpe, or the fixed sinusoidal table (float32 values)
    pre-norm:  x = x + attn(ln_1(x)); x = x + mlp(ln_2(x));  ... ; x = ln_f(x)
    post-norm: x = ln_1(x + attn(x)); x = ln_2(x + mlp(x))   (no ln_f)
    logits = lm_head(x)                   no bias; tied to wte as nanoGPT ties it
    attn: q, k, v = c_attn(x).split(C) (in that order), causal softmax(q k^T / sqrt(HS)) v, c_proj
    mlp:  c_proj(act(c_fc(x))), SwiGLU: c_proj(silu(c_fc(x)) * c_fc2(x))
    LayerNorm: biased variance, eps; RMSNorm: x / sqrt(mean(x^2) + eps) * w

Training: `steps` iterations of (zero_grad, forward, loss, backward, clip_grad_norm_(max_norm),
AdamW.step()) on the same batch. Groups as atto's default_param_groups: weight decay on the
weight matrices of Linear layers, except a weight that is also an embedding (lm_head tied to
wte); none on biases, norms, wte, wpe.

Written tensors:
    logits            [B, T, V] of the loaded model
    loss              [1] mean cross-entropy over targets != -1
    grad.<name>       the gradient of every parameter (named_parameters: a tied weight once,
                      under transformer.wte.weight)
    train.loss        [steps + 1] the loss before each AdamW step, then after the last one
    train.norm        [steps] the gradient norm clip_grad_norm_ returned at each step
    final.<name>      every parameter after the last step
Metadata: "decay" (the decayed parameter names, comma-separated, in named_parameters order),
"no_decay" (the rest), "params" (every parameter name).
"""

import argparse
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st  # noqa: E402

DTYPE = torch.float64


class LayerNorm(nn.Module):
    def __init__(self, dim, bias, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim)) if bias else None
        self.eps = eps

    def forward(self, x):  # biased variance over the last dim
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True)
        y = (x - mean) / torch.sqrt(var + self.eps) * self.weight
        return y + self.bias if self.bias is not None else y


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + self.eps) * self.weight


def make_norm(cfg):
    if cfg.norm == "rmsnorm":
        return RMSNorm(cfg.n_embd, cfg.norm_eps)
    return LayerNorm(cfg.n_embd, cfg.bias, cfg.norm_eps)


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C = cfg.n_embd
        self.n_head = cfg.n_head
        self.n_kv = cfg.n_kv_head or cfg.n_head  # grouped-query attention: key/value heads
        self.kv_width = self.n_kv * (C // cfg.n_head)
        self.c_attn = nn.Linear(C, C + 2 * self.kv_width, bias=cfg.bias)
        self.c_proj = nn.Linear(C, C, bias=cfg.bias)
        self.rope = cfg.pos == "rope"
        self.rope_base = cfg.rope_base

    def forward(self, x):  # [B, T, C]
        B, T, C = x.shape
        NH, HS = self.n_head, C // self.n_head
        q, k, v = self.c_attn(x).split([C, self.kv_width, self.kv_width], dim=2)
        q = q.view(B, T, NH, HS).transpose(1, 2)  # [B, NH, T, HS]
        k, v = (t.view(B, T, self.n_kv, HS).transpose(1, 2) for t in (k, v))  # [B, NKV, T, HS]
        if self.rope:
            q, k = rotary(q, self.rope_base), rotary(k, self.rope_base)
        # Hugging Face's repeat_kv: key/value head j serves query heads j * group .. + group - 1.
        k, v = (t.repeat_interleave(NH // self.n_kv, dim=1) for t in (k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(HS)
        causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
        att = F.softmax(att.masked_fill(~causal, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C, F_ = cfg.n_embd, cfg.d_ff
        self.c_fc = nn.Linear(C, F_, bias=cfg.bias)
        if cfg.activation == "swiglu":
            self.c_fc2 = nn.Linear(C, F_, bias=cfg.bias)
        self.c_proj = nn.Linear(F_, C, bias=cfg.bias)
        self.activation = cfg.activation

    def forward(self, x):
        h = self.c_fc(x)
        if self.activation == "relu":
            h = F.relu(h)
        elif self.activation == "gelu":
            h = F.gelu(h)
        elif self.activation == "gelu_tanh":
            h = F.gelu(h, approximate="tanh")
        else:
            h = F.silu(h) * self.c_fc2(x)
        return self.c_proj(h)


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.ln_1 = make_norm(cfg)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = make_norm(cfg)
        self.mlp = MLP(cfg)
        self.pre_norm = cfg.pre_norm

    def forward(self, x):
        if self.pre_norm:
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))
        x = self.ln_1(x + self.attn(x))
        return self.ln_2(x + self.mlp(x))


def sinusoidal_table(max_len, dim):
    """atto's table: angles in double, values rounded to float32."""
    pe = np.zeros((max_len, dim), dtype=np.float64)
    for pos in range(max_len):
        for i in range(0, dim, 2):
            angle = pos / math.pow(10000.0, i / dim)
            pe[pos, i] = math.sin(angle)
            if i + 1 < dim:
                pe[pos, i + 1] = math.cos(angle)
    return torch.from_numpy(pe.astype(np.float32))


def rotary(x, base=10000.0):
    """Meta llama's RoPE on [B, NH, T, HS]: the pair (x[2i], x[2i+1]) at position t turned by
    t * base^(-2i/HS), as complex numbers (the angles in float64, then float32)."""
    T, HS = x.shape[-2], x.shape[-1]
    freqs = base ** (-torch.arange(0, HS, 2, dtype=torch.float64) / HS)
    angles = torch.outer(torch.arange(T, dtype=torch.float64), freqs)
    rot = torch.polar(torch.ones_like(angles), angles).to(torch.complex64)  # [T, HS/2]
    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], HS // 2, 2))
    return torch.view_as_real(xc * rot).flatten(-2).type_as(x)


class GPT(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        parts = dict(wte=nn.Embedding(cfg.vocab, cfg.n_embd))
        if cfg.pos == "learned":
            parts["wpe"] = nn.Embedding(cfg.block, cfg.n_embd)
        parts["h"] = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)])
        if cfg.pre_norm:
            parts["ln_f"] = make_norm(cfg)
        self.transformer = nn.ModuleDict(parts)
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab, bias=False)
        if cfg.tie:
            self.transformer.wte.weight = self.lm_head.weight  # nanoGPT's weight tying
        if cfg.pos == "sinusoidal":  # a fixed table, not in the state_dict
            self.register_buffer("pe", sinusoidal_table(cfg.block, cfg.n_embd), persistent=False)
        self.cfg = cfg

    def forward(self, idx):  # idx [B, T] -> logits [B, T, V]
        T = idx.shape[1]
        if self.cfg.pos == "learned":
            pos = self.transformer.wpe(torch.arange(T))
        elif self.cfg.pos == "sinusoidal":
            pos = self.pe[:T]
        else:  # rope: the attention rotates q and k
            pos = 0
        x = self.transformer.wte(idx) + pos
        for block in self.transformer.h:
            x = block(x)
        if self.cfg.pre_norm:
            x = self.transformer.ln_f(x)
        return self.lm_head(x)


def load_weights(model, path, cfg):
    tensors, _ = st.load_torch(path)
    if cfg.tie:
        for n in ("lm_head.weight", "transformer.wte.weight"):
            if n not in tensors:
                sys.exit(f"{path}: tied weights, but no tensor {n!r}")
        if not torch.equal(tensors["lm_head.weight"], tensors["transformer.wte.weight"]):
            sys.exit(f"{path}: tied lm_head.weight and transformer.wte.weight differ")
    model.load_state_dict({k: v.to(DTYPE) for k, v in tensors.items()}, strict=True)
    if cfg.tie and model.lm_head.weight is not model.transformer.wte.weight:
        sys.exit("loading untied lm_head.weight from transformer.wte.weight")


def param_groups(model):
    """atto's default_param_groups: decay the Linear weight matrices that are not embeddings."""
    linear = {id(m.weight) for m in model.modules() if isinstance(m, nn.Linear)}
    embedding = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
    decay, no_decay = [], []
    for n, p in model.named_parameters():
        (decay if id(p) in linear and id(p) not in embedding else no_decay).append((n, p))
    return decay, no_decay


AUTOCAST = False  # --autocast bf16: float32 weights, the forward under torch.autocast bf16


def loss_of(model, idx, targets):
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=AUTOCAST):
        logits = model(idx)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)).float(), targets.view(-1), ignore_index=-1)
    return logits.float(), loss


def train(model, idx, targets, cfg, out):
    decay, no_decay = param_groups(model)
    opt = torch.optim.AdamW(
        [{"params": [p for _, p in decay], "weight_decay": cfg.weight_decay},
         {"params": [p for _, p in no_decay], "weight_decay": 0.0}],
        lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), eps=cfg.adam_eps, foreach=False)
    params = [p for _, p in model.named_parameters()]
    losses, norms = [], []
    for _ in range(cfg.steps):
        opt.zero_grad(set_to_none=True)
        _, loss = loss_of(model, idx, targets)
        losses.append(loss.item())
        loss.backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_(params, cfg.max_norm)))
        opt.step()
    with torch.no_grad():
        losses.append(loss_of(model, idx, targets)[1].item())
    out["train.loss"] = torch.tensor(losses, dtype=DTYPE)
    out["train.norm"] = torch.tensor(norms, dtype=DTYPE)
    for n, p in model.named_parameters():
        out[f"final.{n}"] = p.detach().clone()
    return decay, no_decay


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--weights", required=True)
    ap.add_argument("--batch", required=True)
    for name in ("vocab", "block", "n-layer", "n-head", "n-embd", "d-ff", "pre-norm", "bias", "tie",
                 "steps"):
        ap.add_argument(f"--{name}", type=int, required=True)
    ap.add_argument("--activation", required=True, choices=["relu", "gelu", "gelu_tanh", "swiglu"])
    ap.add_argument("--norm", required=True, choices=["layernorm", "rmsnorm"])
    ap.add_argument("--pos", required=True, choices=["learned", "sinusoidal", "rope"])
    ap.add_argument("--n-kv-head", type=int, default=0, help="grouped-query attention; 0: --n-head")
    ap.add_argument("--rope-base", type=float, default=10000.0)
    for name in ("norm-eps", "lr", "beta1", "beta2", "adam-eps", "weight-decay", "max-norm"):
        ap.add_argument(f"--{name}", type=float, required=True)
    ap.add_argument("--autocast", choices=["none", "bf16"], default="none",
                    help="bf16: float32 model, forward under torch.autocast('cpu', dtype=torch.bfloat16) "
                         "(atto's --precision bf16), instead of float64")
    cfg = ap.parse_args()
    global DTYPE, AUTOCAST
    if cfg.autocast == "bf16":
        DTYPE, AUTOCAST = torch.float32, True

    torch.manual_seed(0)  # the weights come from the file; this only fixes the unused init
    model = GPT(cfg).to(DTYPE)
    load_weights(model, cfg.weights, cfg)

    batch, _ = st.load(cfg.batch)
    idx = torch.from_numpy(np.rint(batch["idx"]).astype(np.int64))
    targets = torch.from_numpy(np.rint(batch["targets"]).astype(np.int64))
    if idx.dim() != 2 or idx.shape != targets.shape or idx.shape[1] > cfg.block:
        sys.exit(f"{cfg.batch}: idx {tuple(idx.shape)} and targets {tuple(targets.shape)} must be "
                 f"[B, T] with T <= {cfg.block}")

    out = {}
    logits, loss = loss_of(model, idx, targets)
    loss.backward()
    out["logits"] = logits.detach()
    out["loss"] = loss.detach().reshape(1)
    for n, p in model.named_parameters():
        if p.grad is None:
            sys.exit(f"parameter {n} got no gradient")
        out[f"grad.{n}"] = p.grad.clone()

    decay, no_decay = train(model, idx, targets, cfg, out)
    meta = {"case": cfg.case,
            "decay": ",".join(n for n, _ in decay),
            "no_decay": ",".join(n for n, _ in no_decay),
            "params": ",".join(n for n, _ in model.named_parameters())}
    st.save(out, cfg.out, metadata=meta)


if __name__ == "__main__":
    main()
