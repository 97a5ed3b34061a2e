"""PyTorch reference for tests/parity/test_parity_hf_import.cpp: a reduced GPT-2 written in
Hugging Face's layout, and its logits by Hugging Face's GPT-2 equations (no transformers package).

    /usr/bin/python3 ref_hf_gpt2.py --case prefix --out ref.safetensors --dir CHECKPOINT \
        [--dtype f32|f16|bf16] [--checkpoint-only]

The direction is PyTorch -> atto: this script makes the checkpoint (random weights, numpy, seeded)
and writes it into CHECKPOINT as Hugging Face ships GPT-2: model.safetensors (st.py; Conv1D
weights [in, out]; the causal-mask buffers h.<i>.attn.bias; names with the "transformer." prefix
for --case prefix, without for --case plain; no lm_head.weight: tied), config.json, vocab.json and
merges.txt (256 byte tokens in GPT-2's printable form, a few merges, <|endoftext|>). Then, unless
--checkpoint-only, it encodes TEXT by applying the merges itself and computes the logits in
float64 from the stored (rounded) weights:
    h = wte[ids] + wpe[0..T)
    per block: a = LN(h; ln_1); qkv = a @ W_attn + b_attn  (W [C, 3C]: Conv1D, x @ W + b)
               q, k, v split, 4 heads; softmax(q k^T / sqrt(head_dim) + causal mask) v
               h = h + merge(y) @ W_proj + b_proj
               h = h + gelu_new(LN(h; ln_2) @ W_fc + b_fc) @ W_mproj + b_mproj
    logits = LN(h; ln_f) @ wte^T          (the tied head)
    gelu_new(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)));  LN eps 1e-5, biased variance
Written tensors: ids [T] (as floats), logits [1, T, V]; metadata "text".

The other direction, atto -> PyTorch (tests/run/test_hf_export.cpp, `atto export --format hf`):

    /usr/bin/python3 ref_hf_gpt2.py --case export --out ref.safetensors --dir EXPORT [--dir EXPORT2 ...]

LOADS each directory as Hugging Face's GPT-2 does: config.json (n_layer, n_head, n_inner,
activation_function gelu_new or gelu, tie_word_embeddings), model.safetensors (names with the
"transformer." prefix, Conv1D weights [in, out], lm_head.weight when untied) and vocab.json +
merges.txt; encodes TEXT with those merges and computes, in float64 by the equations above (gelu
is the erf GELU; an untied head is lm_head.weight), the log-probabilities log_softmax(logits).
Written tensors, for the k-th directory: ids_k [T] (as floats), logprobs_k [1, T, V].
"""

import argparse
import json
import math
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st  # noqa: E402

N_LAYER, N_EMBD, N_HEAD, N_POS = 2, 32, 4, 16
TEXT = "the hat in the hut!"
MERGES = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("a", "t"), ("Ġ", "h"), ("i", "n"), ("Ġh", "at")]


def bytes_to_unicode():
    """GPT-2's byte -> printable character map (the order of encoder.py)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def vocabulary():
    """{token: id}: the 256 bytes in encoder.py's order, the merges, <|endoftext|>."""
    vocab = {c: i for i, c in enumerate(bytes_to_unicode().values())}
    for a, b in MERGES:
        vocab[a + b] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    return vocab


def encode(text, vocab, merges=MERGES):
    """GPT-2's BPE of an ASCII text: its pattern (ASCII letters and digits), then merges by rank."""
    pat = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+""")
    byte_char = bytes_to_unicode()
    rank = {m: i for i, m in enumerate(merges)}
    ids = []
    for chunk in pat.findall(text):
        parts = [byte_char[b] for b in chunk.encode("utf-8")]
        while len(parts) > 1:
            pairs = [(rank.get((parts[i], parts[i + 1]), math.inf), i) for i in range(len(parts) - 1)]
            r, i = min(pairs)
            if r == math.inf:
                break
            parts[i:i + 2] = [parts[i] + parts[i + 1]]
        ids += [vocab[p] for p in parts]
    return ids


def rounded(x, dtype):
    """float32 values as the file stores them (f16/bf16 rounding applied), and what to store."""
    import_dtype = {"f32": np.float32, "f16": np.float16}.get(dtype)
    if import_dtype is not None:
        stored = x.astype(import_dtype)
        return stored.astype(np.float32), stored
    bits = x.astype(np.float32).view(np.uint32)  # bf16: round to nearest even, keep the top half
    top = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return (top.astype(np.uint32) << 16).view(np.float32), ("BF16", top)


def make_weights(vocab_size, dtype):
    """{name without prefix: (float32 value, stored array)} in HF's layout."""
    rng = np.random.default_rng(7)
    C, F = N_EMBD, 4 * N_EMBD
    shapes = {"wte.weight": (vocab_size, C), "wpe.weight": (N_POS, C)}
    for i in range(N_LAYER):
        for n, s in [("ln_1.weight", (C,)), ("ln_1.bias", (C,)), ("attn.c_attn.weight", (C, 3 * C)),
                     ("attn.c_attn.bias", (3 * C,)), ("attn.c_proj.weight", (C, C)), ("attn.c_proj.bias", (C,)),
                     ("ln_2.weight", (C,)), ("ln_2.bias", (C,)), ("mlp.c_fc.weight", (C, F)),
                     ("mlp.c_fc.bias", (F,)), ("mlp.c_proj.weight", (F, C)), ("mlp.c_proj.bias", (C,))]:
            shapes[f"h.{i}.{n}"] = s
    shapes.update({"ln_f.weight": (C,), "ln_f.bias": (C,)})
    out = {}
    for n, s in shapes.items():
        x = rng.normal(0.0, 0.3, s).astype(np.float32)
        if n.startswith("ln_") or ".ln_" in n:
            x = (1.0 + x if n.endswith("weight") else x).astype(np.float32)
        out[n] = rounded(x, dtype)
    return out


def save_checkpoint(d, weights, vocab, prefix):
    os.makedirs(d, exist_ok=True)
    tensors = {}
    for n, (_, stored) in weights.items():
        tensors[("transformer." + n) if prefix else n] = stored
    for i in range(N_LAYER):  # the causal-mask buffer older transformers saved
        mask = np.tril(np.ones((N_POS, N_POS), np.float32)).reshape(1, 1, N_POS, N_POS)
        tensors[("transformer." if prefix else "") + f"h.{i}.attn.bias"] = mask
    bf16 = {k: v[1] for k, v in tensors.items() if isinstance(v, tuple)}
    if bf16:
        import torch
        for k, top in bf16.items():
            tensors[k] = torch.from_numpy(top.view(np.int16).copy()).view(torch.bfloat16)
    st.save(tensors, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    config = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": len(vocab),
              "n_positions": N_POS, "n_ctx": N_POS, "n_embd": N_EMBD, "n_layer": N_LAYER, "n_head": N_HEAD,
              "n_inner": None, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
              "resid_pdrop": 0.1, "embd_pdrop": 0.1, "attn_pdrop": 0.1, "scale_attn_weights": True,
              "bos_token_id": len(vocab) - 1, "eos_token_id": len(vocab) - 1}
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    with open(os.path.join(d, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(os.path.join(d, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in MERGES))


def logits_of(weights, ids):
    import torch
    w = {n: torch.from_numpy(np.array(v[0], dtype=np.float64)) for n, v in weights.items()}
    return gpt2_logits(w, ids, N_LAYER, N_HEAD, "gelu_new")


def gpt2_logits(w, ids, n_layer, n_head, activation):
    """Hugging Face's GPT-2 forward in float64: w {name without prefix: float64 tensor}."""
    import torch
    T, C, H = len(ids), w["wte.weight"].shape[1], n_head
    hd = C // H

    def ln(x, p):
        mu = x.mean(-1, keepdim=True)
        var = ((x - mu) ** 2).mean(-1, keepdim=True)
        return (x - mu) / torch.sqrt(var + 1e-5) * w[p + ".weight"] + w[p + ".bias"]

    def conv1d(x, p):  # Hugging Face's Conv1D: x @ W + b, W [in, out]
        return x @ w[p + ".weight"] + w[p + ".bias"]

    def gelu_new(x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))

    def gelu(x):  # "gelu": the erf form
        return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))

    act = {"gelu_new": gelu_new, "gelu": gelu}[activation]

    h = w["wte.weight"][torch.tensor(ids)] + w["wpe.weight"][:T]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for i in range(n_layer):
        p = f"h.{i}."
        q, k, v = conv1d(ln(h, p + "ln_1"), p + "attn.c_attn").split(C, dim=-1)
        q, k, v = (t.view(T, H, hd).transpose(0, 1) for t in (q, k, v))
        att = (q @ k.transpose(-1, -2)) / math.sqrt(hd)
        att = torch.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(0, 1).reshape(T, C)
        h = h + conv1d(y, p + "attn.c_proj")
        h = h + conv1d(act(conv1d(ln(h, p + "ln_2"), p + "mlp.c_fc")), p + "mlp.c_proj")
    head = w.get("lm_head.weight", w["wte.weight"])
    return (ln(h, "ln_f") @ head.T).unsqueeze(0)


def load_export(d):
    """A GPT-2 directory as Hugging Face loads it: (float64 weights without prefix, config, vocab, merges)."""
    import torch
    with open(os.path.join(d, "config.json")) as f:
        config = json.load(f)
    assert config["model_type"] == "gpt2" and config["architectures"] == ["GPT2LMHeadModel"], config
    assert config["layer_norm_epsilon"] == 1e-5 and config["n_positions"] == config["n_ctx"], config
    tensors, metadata = st.load(os.path.join(d, "model.safetensors"))
    assert metadata == {"format": "pt"}, metadata
    w = {}
    for n, x in tensors.items():
        assert n.startswith("transformer.") or n == "lm_head.weight", n
        if n.endswith((".attn.bias", ".attn.masked_bias")):
            continue  # the causal-mask buffers older versions saved
        w[n[len("transformer."):] if n.startswith("transformer.") else n] = torch.from_numpy(x.astype(np.float64))
    C, L = config["n_embd"], config["n_layer"]
    F = config["n_inner"] or 4 * C
    assert w["wte.weight"].shape == (config["vocab_size"], C), w["wte.weight"].shape
    assert w["wpe.weight"].shape == (config["n_positions"], C), w["wpe.weight"].shape
    assert all(f"h.{i}.mlp.c_fc.weight" in w for i in range(L)) and f"h.{L}.ln_1.weight" not in w
    assert w["h.0.attn.c_attn.weight"].shape == (C, 3 * C) and w["h.0.mlp.c_fc.weight"].shape == (C, F)
    assert ("lm_head.weight" in w) == (not config.get("tie_word_embeddings", True)), "lm_head.weight and tie_word_embeddings"
    with open(os.path.join(d, "vocab.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    with open(os.path.join(d, "merges.txt"), encoding="utf-8") as f:
        lines = f.read().split("\n")
    assert lines[0] == "#version: 0.2", lines[0]
    merges = [tuple(m.split(" ")) for m in lines[1:] if m]
    return w, config, vocab, merges


def export_case(dirs, out):
    import torch
    tensors = {}
    for k, d in enumerate(dirs):
        w, config, vocab, merges = load_export(d)
        ids = encode(TEXT, vocab, merges)
        assert len(ids) <= config["n_positions"], f"{len(ids)} tokens for {config['n_positions']} positions"
        logits = gpt2_logits(w, ids, config["n_layer"], config["n_head"], config["activation_function"])
        tensors[f"ids_{k}"] = np.array(ids, np.float32)
        tensors[f"logprobs_{k}"] = torch.log_softmax(logits, dim=-1)
    st.save(tensors, out, metadata={"text": TEXT})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", required=True, choices=["prefix", "plain", "export"])
    ap.add_argument("--out", required=True)
    ap.add_argument("--dir", required=True, action="append")
    ap.add_argument("--dtype", default="f32", choices=["f32", "f16", "bf16"])
    ap.add_argument("--checkpoint-only", action="store_true")
    a = ap.parse_args()
    if a.case == "export":
        export_case(a.dir, a.out)
        return
    vocab = vocabulary()
    weights = make_weights(len(vocab), a.dtype)
    save_checkpoint(a.dir[-1], weights, vocab, a.case == "prefix")
    if a.checkpoint_only:
        return
    ids = encode(TEXT, vocab)
    assert len(ids) <= N_POS, f"{len(ids)} tokens for {N_POS} positions"
    st.save({"ids": np.array(ids, np.float32), "logits": logits_of(weights, ids)}, a.out,
            metadata={"text": TEXT})


if __name__ == "__main__":
    main()
