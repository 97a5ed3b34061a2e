"""PyTorch reference for tests/parity/test_parity_seq2seq.cpp: the encoder-decoder Transformer of
"Attention Is All You Need", built from torch 1.13 primitives, loading atto's model.safetensors
without renaming; forward, loss and backward in float64.

    /usr/bin/python3 ref_seq2seq.py --case paper --out ref.safetensors \
        --weights model.safetensors --batch batch.safetensors \
        --src-vocab 11 --tgt-vocab 13 --max-len 12 --n-enc 2 --n-dec 2 --n-head 2 --d-model 16 \
        --d-ff 64 --activation relu --norm layernorm --pre-norm 0 --bias 1 --pos sinusoidal \
        --share 0 --tie 1 --norm-eps 1e-5 --label-smoothing 0.1

The direction is atto -> PyTorch: atto writes the weights with save_model_weights and the batch
of make_batch (integers and 0/1 masks stored as floats):
    src, src_mask [B, S]      source ids, 1 = token, 0 = padding
    tgt_in, tgt_mask [B, T]   BOS y1 .. yn then padding; 1 = token
    tgt_out [B, T]            y1 .. yn EOS then -1 (ignored by the loss)
    src_alt, tgt_in_alt       the same batch with other ids in the padded positions

Model (mirrors src/models/seq2seq.h, src/nn/blocks.h, src/nn/attention.h):
    x = embed_tokens(ids) * sqrt(C) + pos      learned embed_positions, or the fixed sinusoidal
                                               table (float32 values, as atto's)
    encoder layer (post-norm): x = ln_1(x + attn(x)); x = ln_2(x + mlp(x))
    decoder layer (post-norm): y = ln_1(y + attn(y)); y = ln_2(y + cross_attn(y, mem));
                               y = ln_3(y + mlp(y))
    pre-norm: x = x + attn(ln_1(x)) ...; then ln_f ends each stack
    logits = lm_head(y)                        no bias
    attn:       q, k, v = c_attn(x).split(C); softmax(q k^T / sqrt(HS) + mask) v; c_proj
    cross_attn: q = q_proj(y); k, v = kv_proj(memory).split(C); same attention; c_proj
    masks: encoder self-attention and cross-attention mask the padded source keys (src_mask);
           decoder self-attention is causal and masks the padded target keys (tgt_mask).
           Masked scores are -inf, so padding has exactly no weight.
Ties as nanoGPT ties: share makes decoder.embed_tokens.weight the encoder's Parameter, tie makes
lm_head.weight the decoder's; named_parameters then lists a tied tensor once, under its first
name (as atto's named_parameters does).

Loss: mean over tgt_out != -1 of (1 - ls) * nll + ls * mean_v(-log p_v) (PyTorch's
label_smoothing), written out and checked against F.cross_entropy(ignore_index=-1,
label_smoothing=ls).

Padding checks (the script exits non-zero if one fails):
    - logits of the alt batch at target positions with tgt_mask = 1 equal those of the batch
      (to 1e-12): pad contents do not leak through the masks;
    - with the masks switched off the alt batch's logits differ there (by > 1e-3): the alt batch
      really changes what an unmasked model would see.

Written tensors:
    logits            [B, T, V]
    loss              [1]
    grad.<name>       the gradient of every parameter (named_parameters)
    logits_alt        [B, T, V] of the alt batch
Metadata: "params" (every parameter name, comma-separated).
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
        return RMSNorm(cfg.d_model, cfg.norm_eps)
    return LayerNorm(cfg.d_model, bool(cfg.bias), cfg.norm_eps)


def attend(q, k, v, allowed, n_head):
    """q [B, Tq, C], k, v [B, Tk, C], allowed [B, Tq, Tk] (bool) -> [B, Tq, C]."""
    B, Tq, C = q.shape
    Tk, HS = k.shape[1], C // n_head
    q = q.view(B, Tq, n_head, HS).transpose(1, 2)
    k = k.view(B, Tk, n_head, HS).transpose(1, 2)
    v = v.view(B, Tk, n_head, HS).transpose(1, 2)
    att = (q @ k.transpose(-2, -1)) / math.sqrt(HS)
    att = att.masked_fill(~allowed[:, None], float("-inf"))
    att = torch.softmax(att, dim=-1)
    return (att @ v).transpose(1, 2).reshape(B, Tq, C)


class SelfAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C = cfg.d_model
        self.c_attn = nn.Linear(C, 3 * C, bias=bool(cfg.bias))
        self.c_proj = nn.Linear(C, C, bias=bool(cfg.bias))
        self.n_head = cfg.n_head

    def forward(self, x, allowed):
        q, k, v = self.c_attn(x).split(x.shape[-1], dim=2)
        return self.c_proj(attend(q, k, v, allowed, self.n_head))


class CrossAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C = cfg.d_model
        self.q_proj = nn.Linear(C, C, bias=bool(cfg.bias))
        self.kv_proj = nn.Linear(C, 2 * C, bias=bool(cfg.bias))
        self.c_proj = nn.Linear(C, C, bias=bool(cfg.bias))
        self.n_head = cfg.n_head

    def forward(self, x, memory, allowed):
        k, v = self.kv_proj(memory).split(x.shape[-1], dim=2)
        return self.c_proj(attend(self.q_proj(x), k, v, allowed, self.n_head))


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C, F_ = cfg.d_model, cfg.d_ff
        self.c_fc = nn.Linear(C, F_, bias=bool(cfg.bias))
        if cfg.activation == "swiglu":
            self.c_fc2 = nn.Linear(C, F_, bias=bool(cfg.bias))
        self.c_proj = nn.Linear(F_, C, bias=bool(cfg.bias))
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


class EncoderLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.ln_1 = make_norm(cfg)
        self.attn = SelfAttention(cfg)
        self.ln_2 = make_norm(cfg)
        self.mlp = MLP(cfg)
        self.pre_norm = cfg.pre_norm

    def forward(self, x, allowed):
        if self.pre_norm:
            x = x + self.attn(self.ln_1(x), allowed)
            return x + self.mlp(self.ln_2(x))
        x = self.ln_1(x + self.attn(x, allowed))
        return self.ln_2(x + self.mlp(x))


class DecoderLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.ln_1 = make_norm(cfg)
        self.attn = SelfAttention(cfg)
        self.ln_2 = make_norm(cfg)
        self.cross_attn = CrossAttention(cfg)
        self.ln_3 = make_norm(cfg)
        self.mlp = MLP(cfg)
        self.pre_norm = cfg.pre_norm

    def forward(self, y, memory, self_allowed, cross_allowed):
        if self.pre_norm:
            y = y + self.attn(self.ln_1(y), self_allowed)
            y = y + self.cross_attn(self.ln_2(y), memory, cross_allowed)
            return y + self.mlp(self.ln_3(y))
        y = self.ln_1(y + self.attn(y, self_allowed))
        y = self.ln_2(y + self.cross_attn(y, memory, cross_allowed))
        return self.ln_3(y + self.mlp(y))


def sinusoidal_table(max_len, dim):
    """atto's table: angles in double, values rounded to float32."""
    pe = np.zeros((max_len, dim), dtype=np.float64)
    pos = np.arange(max_len, dtype=np.float64)[:, None]
    i = np.arange(0, dim, 2, dtype=np.float64)
    angle = pos / np.power(10000.0, i / dim)[None, :]
    pe[:, 0::2] = np.sin(angle)
    pe[:, 1::2] = np.cos(angle)[:, : dim // 2]
    return torch.from_numpy(pe.astype(np.float32))


class Stack(nn.Module):
    def __init__(self, cfg, decoder, vocab):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, cfg.d_model)
        if cfg.pos == "learned":
            self.embed_positions = nn.Embedding(cfg.max_len, cfg.d_model)
        else:  # a fixed table, not in the state_dict
            self.register_buffer("pe", sinusoidal_table(cfg.max_len, cfg.d_model), persistent=False)
        layer = DecoderLayer if decoder else EncoderLayer
        n = cfg.n_dec if decoder else cfg.n_enc
        self.layers = nn.ModuleList([layer(cfg) for _ in range(n)])
        if cfg.pre_norm:
            self.ln_f = make_norm(cfg)
        self.cfg = cfg

    def embed(self, ids):  # [B, T] -> [B, T, C]
        T = ids.shape[1]
        pos = self.embed_positions(torch.arange(T)) if self.cfg.pos == "learned" else self.pe[:T]
        return self.embed_tokens(ids) * math.sqrt(self.cfg.d_model) + pos

    def final(self, x):
        return self.ln_f(x) if self.cfg.pre_norm else x


class Seq2Seq(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.encoder = Stack(cfg, False, cfg.src_vocab)
        self.decoder = Stack(cfg, True, cfg.tgt_vocab)
        self.lm_head = nn.Linear(cfg.d_model, cfg.tgt_vocab, bias=False)
        if cfg.share:
            self.decoder.embed_tokens.weight = self.encoder.embed_tokens.weight
        if cfg.tie:
            self.lm_head.weight = self.decoder.embed_tokens.weight

    def forward(self, src, src_mask, tgt, tgt_mask):
        """src [B, S], tgt [B, T] ids; masks bool (True = token) -> logits [B, T, V]."""
        S, T = src.shape[1], tgt.shape[1]
        enc_allowed = src_mask[:, None, :].expand(-1, S, S)
        x = self.encoder.embed(src)
        for layer in self.encoder.layers:
            x = layer(x, enc_allowed)
        memory = self.encoder.final(x)
        causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
        self_allowed = causal[None] & tgt_mask[:, None, :]
        cross_allowed = src_mask[:, None, :].expand(-1, T, S)
        y = self.decoder.embed(tgt)
        for layer in self.decoder.layers:
            y = layer(y, memory, self_allowed, cross_allowed)
        return self.lm_head(self.decoder.final(y))


def load_weights(model, path, cfg):
    tensors, _ = st.load_torch(path)
    ties = []
    if cfg.share:
        ties.append(("encoder.embed_tokens.weight", "decoder.embed_tokens.weight"))
    if cfg.tie:
        ties.append(("decoder.embed_tokens.weight", "lm_head.weight"))
    for a, b in ties:
        if a not in tensors or b not in tensors:
            sys.exit(f"{path}: tied weights {a!r} and {b!r}, but the file lacks one of them")
        if not torch.equal(tensors[a], tensors[b]):
            sys.exit(f"{path}: tied {a!r} and {b!r} differ")
    model.load_state_dict({k: v.to(DTYPE) for k, v in tensors.items()}, strict=True)
    if cfg.share and model.decoder.embed_tokens.weight is not model.encoder.embed_tokens.weight:
        sys.exit("loading untied the shared embeddings")
    if cfg.tie and model.lm_head.weight is not model.decoder.embed_tokens.weight:
        sys.exit("loading untied lm_head.weight from decoder.embed_tokens.weight")


def loss_of(logits, tgt_out, ls):
    """Mean label-smoothed cross-entropy over tgt_out != -1, checked against F.cross_entropy."""
    V = logits.shape[-1]
    flat, t = logits.reshape(-1, V), tgt_out.reshape(-1)
    valid = t != -1
    logp = F.log_softmax(flat[valid], dim=-1)
    nll = -logp.gather(1, t[valid][:, None]).squeeze(1)
    loss = ((1.0 - ls) * nll - ls * logp.mean(-1)).mean()
    torch_loss = F.cross_entropy(flat, t, ignore_index=-1, label_smoothing=ls)
    if abs(loss.item() - torch_loss.item()) > 1e-12:
        sys.exit(f"the written-out loss {loss.item()} differs from F.cross_entropy's {torch_loss.item()}")
    return loss


def check_padding(model, b, logits):
    """Pad contents must not change the logits at real target positions, and must change them
    once the masks are off (so the first check can fail)."""
    rows = b["tgt_mask"]  # [B, T] bool
    with torch.no_grad():
        alt = model(b["src_alt"], b["src_mask"], b["tgt_in_alt"], b["tgt_mask"])
        leak = (alt - logits)[rows].abs().max().item()
        if leak > 1e-12:
            sys.exit(f"padding leaks in the reference: logits change by {leak} when pad contents change")
        on_s, on_t = torch.ones_like(b["src_mask"]), torch.ones_like(b["tgt_mask"])
        unmasked = model(b["src"], on_s, b["tgt_in"], on_t)
        unmasked_alt = model(b["src_alt"], on_s, b["tgt_in_alt"], on_t)
        seen = (unmasked_alt - unmasked)[rows].abs().max().item()
        if seen < 1e-3:
            sys.exit(f"the alt batch changes the unmasked logits by only {seen}: the padding check is vacuous")
    return alt


def read_batch(path, cfg):
    raw, _ = st.load(path)
    need = ("src", "src_mask", "tgt_in", "tgt_out", "tgt_mask", "src_alt", "tgt_in_alt")
    missing = [n for n in need if n not in raw]
    if missing:
        sys.exit(f"{path}: missing tensors {missing}")
    b = {n: torch.from_numpy(np.rint(raw[n]).astype(np.int64)) for n in need}
    for n in ("src_mask", "tgt_mask"):
        b[n] = b[n] != 0
    S, T = b["src"].shape[1], b["tgt_in"].shape[1]
    if S > cfg.max_len or T > cfg.max_len:
        sys.exit(f"{path}: S={S} or T={T} exceeds max_len {cfg.max_len}")
    for n in ("src_mask", "src_alt"):
        if b[n].shape != b["src"].shape:
            sys.exit(f"{path}: {n} {tuple(b[n].shape)} must have src's shape {tuple(b['src'].shape)}")
    for n in ("tgt_out", "tgt_mask", "tgt_in_alt"):
        if b[n].shape != b["tgt_in"].shape:
            sys.exit(f"{path}: {n} {tuple(b[n].shape)} must have tgt_in's shape {tuple(b['tgt_in'].shape)}")
    return b


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--weights", required=True)
    ap.add_argument("--batch", required=True)
    for name in ("src-vocab", "tgt-vocab", "max-len", "n-enc", "n-dec", "n-head", "d-model", "d-ff",
                 "pre-norm", "bias", "share", "tie"):
        ap.add_argument(f"--{name}", type=int, required=True)
    ap.add_argument("--activation", required=True, choices=["relu", "gelu", "gelu_tanh", "swiglu"])
    ap.add_argument("--norm", required=True, choices=["layernorm", "rmsnorm"])
    ap.add_argument("--pos", required=True, choices=["learned", "sinusoidal"])
    ap.add_argument("--norm-eps", type=float, required=True)
    ap.add_argument("--label-smoothing", type=float, required=True)
    cfg = ap.parse_args()
    if cfg.share and cfg.src_vocab != cfg.tgt_vocab:
        sys.exit(f"--share 1 needs equal vocabularies, got {cfg.src_vocab} and {cfg.tgt_vocab}")

    torch.manual_seed(0)  # the weights come from the file; this only fixes the unused init
    model = Seq2Seq(cfg).to(DTYPE)
    load_weights(model, cfg.weights, cfg)
    b = read_batch(cfg.batch, cfg)

    logits = model(b["src"], b["src_mask"], b["tgt_in"], b["tgt_mask"])
    loss = loss_of(logits, b["tgt_out"], cfg.label_smoothing)
    loss.backward()
    out = {"logits": logits.detach(), "loss": loss.detach().reshape(1)}
    for n, p in model.named_parameters():
        if p.grad is None:
            sys.exit(f"parameter {n} got no gradient")
        out[f"grad.{n}"] = p.grad.clone()
    out["logits_alt"] = check_padding(model, b, logits.detach())
    meta = {"case": cfg.case, "params": ",".join(n for n, _ in model.named_parameters())}
    st.save(out, cfg.out, metadata=meta)


if __name__ == "__main__":
    main()
