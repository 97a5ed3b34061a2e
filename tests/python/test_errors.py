"""Errors: atto.Error with atto's message; bad arguments are InvalidArgumentError (a ValueError)."""
import pytest

import atto
from conftest import TINY_KEYS


def test_exception_classes():
    assert issubclass(atto.Error, Exception)
    assert issubclass(atto.InvalidArgumentError, atto.Error)
    assert issubclass(atto.InvalidArgumentError, ValueError)


def test_missing_run_directory(work):
    with pytest.raises(atto.Error, match="is not a run directory") as e:
        atto.Model(work / "nosuch")
    assert not isinstance(e.value, ValueError)
    assert e.value.status == "ATTO_ERR_BAD_INPUT"


@pytest.mark.parametrize("kwargs,message", [
    (dict(n=0), "n_samples must be at least 1"),
    (dict(n=10**12), "n_samples must be at most 1048576"),
    (dict(temperature=0.0), "temperature must be > 0"),
    (dict(top_p=1.5), "top_p must be in (0, 1]"),
    (dict(top_k=-1), "top_k must be >= 0"),
    (dict(frequency_penalty=5.0), "frequency_penalty must be in [-2, 2]"),
    (dict(logit_bias={999: 1.0}), "logit_bias: token id 999 is outside this model's vocabulary"),
    (dict(logit_bias={1: 500.0}), "logit_bias: the bias of token 1 must be in [-100, 100]"),
    (dict(logit_bias=[1]), "logit_bias must be a dict"),
    (dict(max_tokens=-1), "max_tokens must be >= 0"),
    (dict(seed=-1), "seed must be in [0,"),
    (dict(n="3"), "n must be an int"),
])
def test_bad_sampler_arguments(model, kwargs, message):
    with pytest.raises(ValueError) as e:
        model.generate(**kwargs)
    assert isinstance(e.value, atto.InvalidArgumentError)
    assert message in str(e.value)
    assert "--" not in str(e.value)  # Python's keywords, not the CLI's flags


def test_bad_text_and_tokens(model):
    with pytest.raises(ValueError, match="unknown character ' '"):
        model.score("ma ri")
    with pytest.raises(ValueError, match="unknown character"):
        model.generate("ma ri")
    with pytest.raises(ValueError, match="unknown character"):
        model.tokenize("x y")
    with pytest.raises(ValueError, match="at least one token"):
        model.logits([])
    with pytest.raises(ValueError, match="outside"):
        model.logits([0, 999])
    with pytest.raises(ValueError, match="exceed the model's context"):
        model.logits([0] * (model.info["context"] + 1))
    with pytest.raises(ValueError, match="outside"):
        model.detokenize([-1])
    with pytest.raises(ValueError, match="'source' or 'target'"):
        model.tokenize("ma", vocab="other")
    with pytest.raises(ValueError, match="must be a str"):
        model.score(["ma", 3])


def test_closed_model(run_dir):
    m = atto.Model(run_dir)
    m.close()
    m.close()  # twice is fine
    assert m.closed
    with pytest.raises(ValueError, match="the model is closed"):
        m.generate()
    with pytest.raises(ValueError, match="the model is closed"):
        m.weights()


def test_bad_training_arguments(work, names):
    with pytest.raises(ValueError, match="no_such_key"):
        atto.train(data=names, out=work / "bad1", no_such_key=3)
    with pytest.raises(ValueError, match="d_model"):
        atto.train(data=names, out=work / "bad2", **dict(TINY_KEYS, d_model=-4))
    with pytest.raises(ValueError, match="steps"):
        atto.train(data=names, out=work / "bad5", **dict(TINY_KEYS, steps=-3))
    with pytest.raises(ValueError, match="needs out="):
        atto.train(data=names)
    with pytest.raises(ValueError, match="not JSON"):
        atto.train(data=names, out=work / "bad3", steps=object())
    with pytest.raises(atto.Error) as e:
        atto.train(data=work / "missing.txt", out=work / "bad4", **TINY_KEYS)
    assert "missing.txt" in str(e.value)
