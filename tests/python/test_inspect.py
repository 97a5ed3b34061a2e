"""Model.inspect / attention / residual_stream / token_embeddings: inside one forward pass, the
numbers `atto inspect` draws (its report's atto-data JSON), checked against that report, against
the model's own logits and against the weights."""
import json
import re

import numpy as np
import pytest

import atto
from conftest import open_model

TEXT = "marielan"


@pytest.fixture(scope="session")
def deep(cli, work, names):
    """A two-layer GPT (so that the residual stream has a row between blocks)."""
    out = work / "deep"
    cli("train", "--data", names, "--out", out, "--steps", "20", "--d-model", "32", "--n-heads", "2",
        "--n-layers", "2", "--block-size", "16", "--eval-every", "20", "--threads", "1", "-q")
    yield from open_model(out)


def report_data(cli, run, text, out):
    """The atto-data JSON of `atto inspect --model RUN --text TEXT --out OUT`."""
    cli("inspect", "--model", run, "--text", text, "--out", out)
    html = (out / "index.html").read_text(encoding="utf-8")
    block = re.search(r'<script type="application/json" id="atto-data">(.*?)</script>', html, re.S)
    assert block, "no atto-data block in the report"
    return json.loads(block.group(1))


def test_attention_rows_are_causal_distributions(model):
    a = model.attention("mariel")
    n_heads, n_layers = model.info["n_heads"], model.info["n_layers"]
    T = 1 + len(model.tokenize("mariel"))  # lines mode: <eos>, then the text
    assert a.dtype == np.float32 and a.shape == (n_layers, n_heads, T, T)
    np.testing.assert_allclose(a.sum(axis=-1), 1.0, atol=1e-5)  # each query's weights over j <= i
    upper = np.triu(np.ones((T, T), dtype=bool), k=1)
    assert np.all(a[..., upper] == 0.0)  # masked: later keys get exactly 0
    assert np.all(a[..., ~upper] > 0.0)  # softmax: every visible key gets some weight
    np.testing.assert_array_equal(a[..., 0, 0], 1.0)  # the first query sees itself only


def test_inspect_equals_atto_inspect(cli, work, deep):
    data = report_data(cli, deep.path, TEXT, work / "report_deep")
    x = deep.inspect(TEXT)
    assert x.tokens == data["input"]["ids"] == [deep.info["eos_token"]] + deep.tokenize(TEXT)
    att = data["attention"]
    assert att["start"] == 0 and att["T"] == len(x.tokens)
    want = np.array(att["weights"], dtype=np.float64)  # [L][H][T][T], shortest round-trip floats
    assert x.attention.shape == want.shape == (2, 2, len(x.tokens), len(x.tokens))
    np.testing.assert_allclose(x.attention, want, rtol=0, atol=1e-6)
    # inspect plots the L2 norm of the stream entering each block: rows 0 .. n_layers-1.
    norms = np.linalg.norm(x.residual_stream.astype(np.float64), axis=-1)
    for layer, r in enumerate(data["residual"]):
        assert r["layer"] == layer
        np.testing.assert_allclose(norms[layer], r["stream"], rtol=1e-6)
    np.testing.assert_array_equal(deep.attention(TEXT), x.attention)  # the same pass again


def norm(x, w, kind, bias):
    x = x.astype(np.float64)
    if kind == "rmsnorm":
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5) * w
    mu = x.mean(-1, keepdims=True)
    y = (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * w
    return y if bias is None else y + bias


def test_residual_stream_rows(deep):
    x = deep.inspect(TEXT)
    r, T = x.residual_stream, len(x.tokens)
    w = deep.weights()
    cfg = deep.info["config"]["model"]
    assert r.dtype == np.float32 and r.shape == (3, T, 32)
    # row 0: the token's embedding plus its position's (learned positions), before any block
    assert cfg["pos"] == "learned"
    emb = w["transformer.wte.weight"][x.tokens] + w["transformer.wpe.weight"][:T]
    np.testing.assert_allclose(r[0], emb, rtol=1e-6, atol=1e-7)
    # the last row, through ln_f and lm_head, gives the logits at every position
    assert cfg["norm_placement"] == "pre"
    h = norm(r[-1], w["transformer.ln_f.weight"], cfg["norm"], w.get("transformer.ln_f.bias"))
    logits = h @ w["lm_head.weight"].T.astype(np.float64)
    if "lm_head.bias" in w:
        logits += w["lm_head.bias"]
    for t in range(T):
        np.testing.assert_allclose(logits[t], deep.logits(x.tokens[:t + 1]), rtol=1e-4, atol=1e-4, err_msg=f"t={t}")
    # each block changes the stream: no row is a copy of the one before
    assert not np.allclose(r[1], r[0]) and not np.allclose(r[2], r[1])


def test_inspect_errors(model, stream_dir, s2s_dir):
    block = model.info["context"]
    with pytest.raises(atto.InvalidArgumentError, match=f"{block + 1} tokens with the <eos>.*block size of {block}"):
        model.attention("a" * block)
    assert model.attention("a" * (block - 1)).shape[-1] == block  # <eos> + block - 1: fits
    with pytest.raises(atto.InvalidArgumentError, match="'z'") as e:
        model.residual_stream("maz")
    assert e.value.status == "ATTO_ERR_BAD_INPUT"
    empty = model.inspect("")  # lines mode: the <eos> alone, as atto inspect --text ""
    assert empty.tokens == [model.info["eos_token"]] and empty.attention.shape[-2:] == (1, 1)
    with atto.Model(stream_dir) as m, pytest.raises(atto.InvalidArgumentError, match="empty"):
        m.attention("")
    with atto.Model(s2s_dir) as m:
        with pytest.raises(atto.InvalidArgumentError, match="encoder-decoder"):
            m.attention("hello")
        with pytest.raises(atto.InvalidArgumentError, match="seq2seq"):
            m.token_embeddings()
    with pytest.raises(atto.InvalidArgumentError, match="text must be a str"):
        model.attention(b"ma")


def test_token_embeddings_are_wte(model):
    e = model.token_embeddings()
    assert e.shape == (model.info["vocab_size"], model.info["d_model"]) and not e.flags.writeable
    np.testing.assert_array_equal(e, model.weights()["transformer.wte.weight"])


def test_post_norm_rope_gqa_residual_stream(cli, work, names):
    """A post-norm GPT has no ln_f: its last row goes to lm_head as it is; rotary positions add
    nothing to the embeddings; grouped-query heads still give one map per query head."""
    out = work / "post"
    cli("train", "--data", names, "--out", out, "--steps", "10", "--d-model", "32", "--n-heads", "4", "--n-kv-heads",
        "2", "--n-layers", "2", "--norm-placement", "post", "--pos", "rope", "--block-size", "16", "--threads", "1",
        "-q")
    with atto.Model(out, threads=1) as m:
        assert (m.info["n_heads"], m.info["n_kv_heads"], m.info["rope_base"]) == (4, 2, 10000.0)
        x = m.inspect(TEXT)
        w = m.weights()
        assert "transformer.ln_f.weight" not in w
        T = len(x.tokens)
        assert x.attention.shape == (2, 4, T, T) and x.residual_stream.shape == (3, T, 32)
        np.testing.assert_allclose(x.attention.sum(-1), 1.0, atol=1e-5)
        np.testing.assert_array_equal(x.residual_stream[0], w["transformer.wte.weight"][x.tokens])
        logits = x.residual_stream[-1].astype(np.float64) @ w["lm_head.weight"].T.astype(np.float64)
        for t in range(T):
            np.testing.assert_allclose(logits[t], m.logits(x.tokens[:t + 1]), rtol=1e-4, atol=1e-4, err_msg=f"t={t}")
