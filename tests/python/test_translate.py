"""Model.translate against `atto translate` (a seq2seq model)."""
import json

import numpy as np
import pytest

import atto

SOURCES = ["hello my name", "hello messi", "my name is messi", ""]


def cli_translations(cli, path, **flags):
    args = ["translate", "--model", path, "--threads", "1", "--json"]
    for k, v in flags.items():
        args += [f"--{k.replace('_', '-')}", v]
    out = cli(*args, stdin="\n".join(SOURCES) + "\n").stdout
    return [[(t["text"], t["score"]) for t in json.loads(line)["translations"]] for line in out.splitlines()]


@pytest.mark.parametrize("flags", [{}, dict(beam=1), dict(beam=3, n_best=2, length_penalty=0.0),
                                   dict(max_len_a=0.5, max_len_b=3)])
def test_translate_equals_atto_translate(cli, s2s_dir, flags):
    want = cli_translations(cli, s2s_dir, **flags)
    with atto.Model(s2s_dir, threads=1) as m:
        got = m.translate(SOURCES, **flags)
    assert len(got) == len(SOURCES)
    for g, w in zip(got, want[:len(SOURCES)]):
        if not w:  # an empty line: atto translate prints no hypotheses
            assert all(t.text == "" for t in g)
            continue
        assert [t.text for t in g] == [t for t, _ in w]
        assert [t.score for t in g] == pytest.approx([s for _, s in w], rel=1e-9)


def test_seq2seq_model(s2s_dir, model):
    with atto.Model(s2s_dir) as m:
        i = m.info
        assert i["task"] == "seq2seq" and i["n_dec_layers"] == 1
        one = m.translate("hello messi", n_best=2)
        assert len(one) == 2 and all(isinstance(t, atto.Translation) for t in one)
        assert m.detokenize(m.tokenize("hola", vocab="target"), vocab="target") == "hola"
        with pytest.raises(ValueError, match="encoder-decoder"):
            m.generate()
        # greedy decoding takes the argmax of the decoder's logits at each step
        best = m.translate("hello messi", beam=1)[0].text
        ids = m.tokenize(best, vocab="target")
        for k in range(min(len(ids), 4)):
            z = m.translate_logits("hello messi", ids[:k])
            assert z.dtype == np.float32 and z.shape == (i["tgt_vocab_size"],)
            assert int(np.argmax(z)) == ids[k]
        with pytest.raises(ValueError, match="prefix token"):
            m.translate_logits("hello", [10**6])
        with pytest.raises(ValueError, match="n-best must be in"):
            m.translate("hello", beam=2, n_best=3)
    with pytest.raises(ValueError, match="this model is a GPT"):
        model.translate("hello")
