"""PyTorch references for atto's nn modules and transformer ops (tests/parity/test_parity_modules.cpp).

    /usr/bin/python3 ref_modules.py --case mha_self --out ref.safetensors
    /usr/bin/python3 ref_modules.py --case all --out refs.safetensors   # every case, "<case>/" prefixed
    /usr/bin/python3 ref_modules.py --list          # the case names

Every module is written here from torch primitives (torch 1.13 has no RMSNorm, no
scaled_dot_product_attention and no LayerNorm without bias), with nanoGPT's parameter names, so
atto's state_dict names load directly:
  Linear "weight" [out, in], "bias" [out]
  SelfAttention  c_attn [3C, C] (q, k, v = its output rows 0:C, C:2C, 2C:3C), c_proj [C, C]
  CrossAttention q_proj [C, C], kv_proj [2C, C] (k rows 0:C, v rows C:2C), c_proj [C, C]
  FeedForward    c_fc, c_fc2 (SwiGLU linear branch; c_fc is the silu-gated one), c_proj
  EncoderBlock   ln_1, attn, ln_2, mlp;  DecoderBlock ln_1, attn, ln_2, cross_attn, ln_3, mlp
Heads split C into NH slices of HS = C / NH. Scores are scaled by 1/sqrt(HS). Causal masking is
bottom-right aligned: key j is masked for query i when j > i + (Tk - Tq). Key padding masks are
[B, Tk] with 0 = padded. A query whose keys are all masked gets output 0 and no gradient (atto's
convention; torch itself would give NaN). Dropout is 0 everywhere.

Each case seeds torch, builds the module with random unit-scale weights, makes random inputs
and a random upstream gradient dy, runs y = forward(...), y.backward(dy), and writes one file:
  param.<name>        every parameter (state_dict name)
  in.<name>           every input (masks as float 0/1, cross-entropy targets as float), in.dy
  out.y               the output
  grad.<input>        gradient of every float input
  grad.param.<name>   gradient of every parameter
with the configuration in the metadata (string -> string): kind, n_heads, causal, d_ff,
activation, norm, pre_norm, bias, eps, ... The C++ test builds the atto module from it.

Weights and inputs are drawn in float32 (so atto reads exactly the same values); the reference
runs in float64 and its outputs and gradients are saved as float64, so a comparison measures
atto's float32 error only.
"""

import argparse
import math
import os
import sys
import zlib

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st  # noqa: E402

DT = torch.float64
MASKED = -1e30  # finite, so a fully masked row gives a uniform softmax that we then zero


def randn(*shape, scale=1.0):
    """float32 N(0, scale^2) values, returned as float64 (exactly representable)."""
    return (torch.randn(*shape, dtype=torch.float32) * scale).to(DT)


# ==============================================================================================
# Modules from primitives
# ==============================================================================================
class Linear(torch.nn.Module):
    def __init__(self, n_in, n_out, bias=True):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(n_out, n_in, dtype=DT))
        self.bias = torch.nn.Parameter(torch.empty(n_out, dtype=DT)) if bias else None

    def forward(self, x):  # x [..., in] -> [..., out]
        y = x @ self.weight.t()
        return y + self.bias if self.bias is not None else y


class LayerNorm(torch.nn.Module):
    def __init__(self, dim, bias=True, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.empty(dim, dtype=DT))
        self.bias = torch.nn.Parameter(torch.empty(dim, dtype=DT)) if bias else None

    def forward(self, x):  # biased variance over the last dim
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True)
        y = (x - mean) / torch.sqrt(var + self.eps) * self.weight
        return y + self.bias if self.bias is not None else y


class RMSNorm(torch.nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.empty(dim, dtype=DT))

    def forward(self, x):  # x / sqrt(mean(x^2) + eps) * w
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + self.eps) * self.weight


def attention(q, k, v, n_heads, causal=False, key_mask=None):
    """q [B, Tq, C], k, v [B, Tk, C], key_mask [B, Tk] (1 = attend) -> [B, Tq, C]."""
    B, Tq, C = q.shape
    Tk = k.shape[1]
    HS = C // n_heads
    heads = lambda t, T: t.reshape(B, T, n_heads, HS).transpose(1, 2)  # noqa: E731 [B, NH, T, HS]
    qh, kh, vh = heads(q, Tq), heads(k, Tk), heads(v, Tk)
    scores = (qh @ kh.transpose(-1, -2)) / math.sqrt(HS)  # [B, NH, Tq, Tk]
    allowed = torch.ones(B, 1, Tq, Tk, dtype=torch.bool)
    if causal:
        i = torch.arange(Tq).view(Tq, 1)
        j = torch.arange(Tk).view(1, Tk)
        allowed = allowed & (j <= i + (Tk - Tq)).view(1, 1, Tq, Tk)
    if key_mask is not None:
        allowed = allowed & (key_mask > 0.5).view(B, 1, 1, Tk)
    scores = scores.masked_fill(~allowed, MASKED)
    p = torch.softmax(scores, dim=-1) * allowed  # fully masked rows -> 0
    y = p @ vh  # [B, NH, Tq, HS]
    return y.transpose(1, 2).reshape(B, Tq, C)


class SelfAttention(torch.nn.Module):
    def __init__(self, C, n_heads, bias=True):
        super().__init__()
        self.C, self.n_heads = C, n_heads
        self.c_attn = Linear(C, 3 * C, bias)
        self.c_proj = Linear(C, C, bias)

    def forward(self, x, causal=False, key_mask=None):
        q, k, v = self.c_attn(x).split(self.C, dim=2)
        return self.c_proj(attention(q, k, v, self.n_heads, causal, key_mask))


class CrossAttention(torch.nn.Module):
    def __init__(self, C, n_heads, bias=True):
        super().__init__()
        self.C, self.n_heads = C, n_heads
        self.q_proj = Linear(C, C, bias)
        self.kv_proj = Linear(C, 2 * C, bias)
        self.c_proj = Linear(C, C, bias)

    def forward(self, x, memory, key_mask=None):
        k, v = self.kv_proj(memory).split(self.C, dim=2)
        return self.c_proj(attention(self.q_proj(x), k, v, self.n_heads, False, key_mask))


ACTIVATIONS = {
    "relu": F.relu,
    "gelu": F.gelu,  # exact erf
    "gelu_tanh": lambda h: F.gelu(h, approximate="tanh"),
}


class FeedForward(torch.nn.Module):
    def __init__(self, C, d_ff, activation, bias=True):
        super().__init__()
        self.activation = activation
        self.c_fc = Linear(C, d_ff, bias)
        if activation == "swiglu":
            self.c_fc2 = Linear(C, d_ff, bias)
        self.c_proj = Linear(d_ff, C, bias)

    def forward(self, x):
        h = self.c_fc(x)
        if self.activation == "swiglu":
            h = F.silu(h) * self.c_fc2(x)
        else:
            h = ACTIVATIONS[self.activation](h)
        return self.c_proj(h)


def make_norm(cfg):
    if cfg["norm"] == "rmsnorm":
        return RMSNorm(cfg["C"], cfg["eps"])
    return LayerNorm(cfg["C"], cfg["bias"], cfg["eps"])


class EncoderBlock(torch.nn.Module):
    """Pre-norm: x + Attn(LN1(x)), then + FFN(LN2(.)). Post-norm: LN1(x + Attn(x)), LN2(. + FFN(.))."""

    def __init__(self, cfg):
        super().__init__()
        self.pre_norm = cfg["pre_norm"]
        self.ln_1 = make_norm(cfg)
        self.attn = SelfAttention(cfg["C"], cfg["n_heads"], cfg["bias"])
        self.ln_2 = make_norm(cfg)
        self.mlp = FeedForward(cfg["C"], cfg["d_ff"], cfg["activation"], cfg["bias"])

    def forward(self, x, causal=False, key_mask=None):
        if self.pre_norm:
            h = x + self.attn(self.ln_1(x), causal, key_mask)
            return h + self.mlp(self.ln_2(h))
        h = self.ln_1(x + self.attn(x, causal, key_mask))
        return self.ln_2(h + self.mlp(h))


class DecoderBlock(torch.nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.pre_norm = cfg["pre_norm"]
        self.ln_1 = make_norm(cfg)
        self.attn = SelfAttention(cfg["C"], cfg["n_heads"], cfg["bias"])
        self.ln_2 = make_norm(cfg)
        self.cross_attn = CrossAttention(cfg["C"], cfg["n_heads"], cfg["bias"])
        self.ln_3 = make_norm(cfg)
        self.mlp = FeedForward(cfg["C"], cfg["d_ff"], cfg["activation"], cfg["bias"])

    def forward(self, x, memory, causal, tgt_mask, src_mask):
        if self.pre_norm:
            h = x + self.attn(self.ln_1(x), causal, tgt_mask)
            h = h + self.cross_attn(self.ln_2(h), memory, src_mask)
            return h + self.mlp(self.ln_3(h))
        h = self.ln_1(x + self.attn(x, causal, tgt_mask))
        h = self.ln_2(h + self.cross_attn(h, memory, src_mask))
        return self.ln_3(h + self.mlp(h))


def init_unit_scale(module):
    """Random weights with unit-scale activations: Linear W ~ N(0, 1/in), biases N(0, 0.2^2),
    norm weights 1 + N(0, 0.2^2) and norm biases N(0, 0.2^2), so every parameter matters."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            if p.dim() == 2:
                p.copy_(randn(*p.shape, scale=1.0 / math.sqrt(p.shape[1])))
            elif name.endswith("weight"):
                p.copy_(1.0 + randn(*p.shape, scale=0.2))
            else:
                p.copy_(randn(*p.shape, scale=0.2))
    return module


# ==============================================================================================
# Cases
# ==============================================================================================
def mask_from(rows):
    """A [B, T] float 0/1 key padding mask from strings like '11100' (0 = padded)."""
    return torch.tensor([[float(c) for c in r] for r in rows], dtype=DT)


def leaf(x):
    return x.clone().requires_grad_(True)


def run_module(module, inputs, call):
    """Runs y = call(**inputs), y.backward(dy); returns (tensors dict, y)."""
    init_unit_scale(module)
    float_inputs = {k: leaf(v) for k, v in inputs.items() if not k.endswith("mask")}
    masks = {k: v for k, v in inputs.items() if k.endswith("mask")}
    y = call(**float_inputs, **masks)
    dy = randn(*y.shape)
    y.backward(dy)
    out = {f"param.{n}": p.detach() for n, p in module.named_parameters()}
    out.update({f"in.{k}": v.detach() for k, v in inputs.items()})
    out["in.dy"] = dy
    out["out.y"] = y.detach()
    out.update({f"grad.{k}": v.grad for k, v in float_inputs.items()})
    out.update({f"grad.param.{n}": p.grad for n, p in module.named_parameters()})
    return out


def case_linear(bias, B, T, n_in, n_out):
    m = Linear(n_in, n_out, bias)
    return run_module(m, {"x": randn(B, T, n_in)}, lambda x: m(x)), {"kind": "linear", "in": n_in, "out": n_out,
                                                                   "bias": bias}


def case_norm(kind, bias, B, T, C):
    m = RMSNorm(C, 1e-5) if kind == "rmsnorm" else LayerNorm(C, bias, 1e-5)
    x = randn(B, T, C) * 2.0 + 0.5  # non-zero mean, non-unit variance
    return run_module(m, {"x": x}, lambda x: m(x)), {"kind": kind, "C": C, "bias": bias, "eps": 1e-5}


def case_attention(B, Tq, Tk, C, NH, causal, rows):
    ins = {"q": randn(B, Tq, C), "k": randn(B, Tk, C), "v": randn(B, Tk, C)}
    if rows:
        ins["key_mask"] = mask_from(rows)
    m = torch.nn.Module()  # no parameters
    out = run_module(m, ins, lambda q, k, v, key_mask=None: attention(q, k, v, NH, causal, key_mask))
    return out, {"kind": "attention", "n_heads": NH, "causal": causal}


def case_mha_self(B, T, C, NH, causal, rows):
    m = SelfAttention(C, NH)
    ins = {"x": randn(B, T, C), "key_mask": mask_from(rows)}
    out = run_module(m, ins, lambda x, key_mask: m(x, causal, key_mask))
    return out, {"kind": "mha_self", "C": C, "n_heads": NH, "causal": causal, "bias": True}


def case_mha_cross(B, Tq, Tk, C, NH, rows):
    m = CrossAttention(C, NH)
    ins = {"x": randn(B, Tq, C), "memory": randn(B, Tk, C), "memory_mask": mask_from(rows)}
    out = run_module(m, ins, lambda x, memory, memory_mask: m(x, memory, memory_mask))
    return out, {"kind": "mha_cross", "C": C, "n_heads": NH, "bias": True}


def case_ffn(B, T, C, d_ff, activation, bias=True):
    m = FeedForward(C, d_ff, activation, bias)
    out = run_module(m, {"x": randn(B, T, C)}, lambda x: m(x))
    return out, {"kind": "ffn", "C": C, "d_ff": d_ff, "activation": activation, "bias": bias}


def block_cfg(C, NH, d_ff, pre_norm, activation="gelu", norm="layernorm", bias=True):
    return {"C": C, "n_heads": NH, "d_ff": d_ff, "pre_norm": pre_norm, "activation": activation, "norm": norm,
            "bias": bias, "eps": 1e-5}


def case_encoder(B, T, cfg, causal, rows, kind="encoder_block"):
    m = EncoderBlock(cfg)
    ins = {"x": randn(B, T, cfg["C"])}
    if rows:
        ins["key_mask"] = mask_from(rows)
    out = run_module(m, ins, lambda x, key_mask=None: m(x, causal, key_mask))
    return out, dict(cfg, kind=kind, causal=causal)


def case_decoder(B, T, S, cfg, tgt_rows, src_rows):
    m = DecoderBlock(cfg)
    ins = {"x": randn(B, T, cfg["C"]), "memory": randn(B, S, cfg["C"]), "tgt_mask": mask_from(tgt_rows),
           "src_mask": mask_from(src_rows)}
    out = run_module(m, ins, lambda x, memory, tgt_mask, src_mask: m(x, memory, True, tgt_mask, src_mask))
    return out, dict(cfg, kind="decoder_block", causal=True)


def case_cross_entropy(shape, V, ignored, label_smoothing):
    """logits [..., V]; targets with some rows = -1 (ignored); mean over the counted rows."""
    logits = randn(*shape, V, scale=2.0)
    N = logits.numel() // V
    targets = torch.randint(0, V, (N,))
    targets[torch.tensor(ignored, dtype=torch.long)] = -1
    x = leaf(logits)
    loss = F.cross_entropy(x.reshape(N, V), targets, ignore_index=-1, label_smoothing=label_smoothing)
    # The formula atto documents, to be sure torch's semantics are what we compare against.
    logp = torch.log_softmax(logits.reshape(N, V), -1)
    keep = targets != -1
    per_row = -(1 - label_smoothing) * logp[keep, targets[keep]] - label_smoothing * logp[keep].mean(-1)
    if abs(per_row.mean().item() - loss.item()) > 1e-12:
        sys.exit(f"torch's cross_entropy {loss.item()} differs from the documented formula {per_row.mean().item()}")
    dy = randn(1, scale=1.0).reshape(())
    loss.backward(dy)
    out = {"in.logits": logits, "in.targets": targets.to(DT), "in.dy": dy, "out.y": loss.detach(),
           "grad.logits": x.grad}
    return out, {"kind": "cross_entropy", "ignore_index": -1, "label_smoothing": label_smoothing}


# Masks: batch 0 unpadded, later rows right-padded or with a hole, so padding masks real keys.
PAD2 = ["11111", "11100"]
PAD3 = ["1111111", "1111100", "1011110"]

CASES = {
    "linear": lambda: case_linear(True, 2, 5, 16, 32),
    "linear_nobias": lambda: case_linear(False, 3, 7, 12, 20),
    "layernorm": lambda: case_norm("layernorm", True, 2, 5, 16),
    "layernorm_nobias": lambda: case_norm("layernorm", False, 3, 7, 12),
    "rmsnorm": lambda: case_norm("rmsnorm", False, 3, 7, 12),
    "attention_causal": lambda: case_attention(2, 5, 5, 16, 4, True, None),
    "attention_padded": lambda: case_attention(2, 5, 5, 16, 4, False, PAD2),
    "attention_causal_padded": lambda: case_attention(3, 7, 7, 12, 3, True, PAD3),
    # cross-shaped: Tq < Tk (decoding-like, bottom-right causal) and Tq > Tk (first queries see no key)
    "attention_cross_padded": lambda: case_attention(2, 4, 6, 16, 4, False, ["111111", "111010"]),
    "attention_causal_short_q": lambda: case_attention(2, 3, 6, 16, 4, True, ["111111", "111100"]),
    "attention_causal_long_q": lambda: case_attention(2, 6, 4, 16, 4, True, ["1111", "1110"]),
    # batch 1 has every key padded: all its outputs are 0 with no gradient
    "attention_all_masked_row": lambda: case_attention(2, 3, 4, 8, 2, False, ["1011", "0000"]),
    "mha_self": lambda: case_mha_self(3, 7, 12, 3, True, PAD3),
    "mha_self_padded": lambda: case_mha_self(2, 5, 16, 4, False, PAD2),
    "mha_cross": lambda: case_mha_cross(2, 5, 6, 16, 4, ["111111", "111100"]),
    "ffn_relu": lambda: case_ffn(2, 5, 16, 32, "relu"),
    "ffn_gelu": lambda: case_ffn(2, 5, 16, 32, "gelu"),
    "ffn_gelu_tanh": lambda: case_ffn(3, 7, 12, 20, "gelu_tanh"),
    "ffn_swiglu": lambda: case_ffn(2, 5, 16, 32, "swiglu"),
    "ffn_swiglu_nobias": lambda: case_ffn(3, 7, 12, 20, "swiglu", bias=False),
    "encoder_block_pre": lambda: case_encoder(2, 5, block_cfg(16, 4, 32, True), False, PAD2),
    "encoder_block_post": lambda: case_encoder(3, 7, block_cfg(12, 3, 20, False), False, PAD3),
    "encoder_block_rms_swiglu": lambda: case_encoder(
        2, 5, block_cfg(16, 4, 32, True, "swiglu", "rmsnorm", bias=False), True, PAD2),
    "decoder_block_pre": lambda: case_decoder(2, 5, 6, block_cfg(16, 4, 32, True), PAD2, ["111111", "111000"]),
    "decoder_block_post": lambda: case_decoder(3, 7, 5, block_cfg(12, 3, 20, False, "relu"), PAD3,
                                               ["11111", "11110", "11000"]),
    "gpt_block": lambda: case_encoder(3, 7, block_cfg(12, 3, 48, True), True, None, kind="gpt_block"),
    "cross_entropy": lambda: case_cross_entropy((12,), 11, [2, 7, 8], 0.1),
    "cross_entropy_3d": lambda: case_cross_entropy((2, 5), 13, [4, 9], 0.0),
    "selfcheck": lambda: selfcheck(),
}


def selfcheck():
    """The primitives above against torch's own modules where torch 1.13 has them, so a wrong
    reference cannot pass silently: LayerNorm vs F.layer_norm, SelfAttention and CrossAttention
    vs nn.MultiheadAttention (whose packed in_proj is q, k, v in that order, like c_attn)."""
    B, T, S, C, NH = 2, 5, 6, 16, 4
    x, mem = randn(B, T, C), randn(B, S, C)
    ln = init_unit_scale(LayerNorm(C))
    worst = {"layer_norm": (ln(x) - F.layer_norm(x, (C,), ln.weight, ln.bias, 1e-5)).abs().max().item()}
    mha = torch.nn.MultiheadAttention(C, NH, batch_first=True, dtype=DT)
    sa = init_unit_scale(SelfAttention(C, NH))
    xa = init_unit_scale(CrossAttention(C, NH))
    pad = mask_from(PAD2)
    causal = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)  # True = masked
    with torch.no_grad():
        mha.out_proj.weight.copy_(sa.c_proj.weight)
        mha.out_proj.bias.copy_(sa.c_proj.bias)
        mha.in_proj_weight.copy_(sa.c_attn.weight)
        mha.in_proj_bias.copy_(sa.c_attn.bias)
        want = mha(x, x, x, key_padding_mask=pad < 0.5, attn_mask=causal, need_weights=False)[0]
        worst["self_attention"] = (sa(x, True, pad) - want).abs().max().item()
        mha.out_proj.weight.copy_(xa.c_proj.weight)
        mha.out_proj.bias.copy_(xa.c_proj.bias)
        mha.in_proj_weight.copy_(torch.cat([xa.q_proj.weight, xa.kv_proj.weight]))
        mha.in_proj_bias.copy_(torch.cat([xa.q_proj.bias, xa.kv_proj.bias]))
        src = mask_from(["111111", "110000"])
        want = mha(x, mem, mem, key_padding_mask=src < 0.5, need_weights=False)[0]
        worst["cross_attention"] = (xa(x, mem, src) - want).abs().max().item()
    bad = {k: v for k, v in worst.items() if not v < 1e-12}
    if bad:
        sys.exit(f"reference primitives disagree with torch's modules: {bad}")
    # The case list travels too, so the C++ test notices a case it does not run.
    return ({"out.max_diff": torch.tensor(list(worst.values()), dtype=DT)},
            {"kind": "selfcheck", "cases": ",".join(c for c in CASES if c != "selfcheck")})


def as_metadata(cfg):
    def text(v):
        if isinstance(v, bool):
            return "1" if v else "0"
        return str(v)
    return {k: text(v) for k, v in cfg.items()}


def run_case(name):
    """(tensors, metadata) of one case, seeded by its name."""
    torch.manual_seed(zlib.crc32(name.encode()))
    tensors, cfg = CASES[name]()
    missing = [k for k, v in tensors.items() if v is None]
    if missing:
        sys.exit(f"case {name}: no gradient reached {missing}")
    return {k: v.detach().to(DT).contiguous() for k, v in tensors.items()}, dict(as_metadata(cfg), case=name)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", help="one of --list, or 'all': every case in one file, each tensor and "
                                   "metadata key prefixed with '<case>/' (one torch start-up for all)")
    ap.add_argument("--out", help="safetensors file to write")
    ap.add_argument("--list", action="store_true", help="print the case names")
    args = ap.parse_args()
    if args.list:
        print("\n".join(CASES))
        return
    if (args.case not in CASES and args.case != "all") or not args.out:
        sys.exit(f"need --case (all, or one of {', '.join(CASES)}) and --out; got {args.case!r}, {args.out!r}")
    if args.case != "all":
        tensors, metadata = run_case(args.case)
        st.save(tensors, args.out, metadata=metadata)
        return
    tensors, metadata = {}, {}
    for name in CASES:
        t, m = run_case(name)
        tensors.update({f"{name}/{k}": v for k, v in t.items()})
        metadata.update({f"{name}/{k}": v for k, v in m.items()})
    st.save(tensors, args.out, metadata=metadata)


if __name__ == "__main__":
    main()
