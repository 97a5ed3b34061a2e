"""atto.train(progress=...): a tqdm bar on stderr (or a text line without tqdm), alongside the
caller's callback; nothing when off or (by default) when stderr is not a terminal."""
import sys

import pytest

import atto

# 20 steps: progress reports at steps 10 and 20 (log_every 10), an evaluation at 20.
KEYS = dict(steps=20, d_model=16, n_heads=2, n_layers=1, eval_every=20, threads=1)


def test_progress_true_shows_a_bar_to_the_total_alongside_the_callback(work, names, capfd):
    pytest.importorskip("tqdm")
    seen = []
    r = atto.train(data=names, out=work / "bar", progress=True, callback=seen.append, **KEYS)
    out, err = capfd.readouterr()
    assert r.steps == 20 and [p.step for p in seen] == [10, 20]  # the callback still runs
    assert out == ""
    assert "atto.train" in err and "20/20" in err  # the bar, finished
    assert "10/20" in err  # and updated on the way
    assert "val_loss=" in err  # the evaluation's loss in the postfix


def test_progress_false_and_default_print_nothing(work, names, capfd):
    seen = []
    atto.train(data=names, out=work / "quiet", progress=False, callback=seen.append, **KEYS)
    assert capfd.readouterr() == ("", "")
    assert [p.step for p in seen] == [10, 20]
    # the default shows a bar only on a terminal or in Jupyter: pytest's stderr is neither
    atto.train(data=names, out=work / "quiet", force=True, **KEYS)
    assert capfd.readouterr() == ("", "")


@pytest.mark.parametrize("where", ["_stderr_is_terminal", "in_jupyter"])
def test_default_shows_the_bar_on_a_terminal_or_in_jupyter(work, names, capfd, monkeypatch, where):
    pytest.importorskip("tqdm")
    monkeypatch.setattr(atto._progress, where, lambda: True)
    atto.train(data=names, out=work / "auto", force=True, **KEYS)
    assert "20/20" in capfd.readouterr().err


def test_progress_without_tqdm_is_a_text_line(work, names, capfd, monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)  # `import tqdm` raises ImportError
    atto.train(data=names, out=work / "line", progress=True, **KEYS)
    out, err = capfd.readouterr()
    assert out == ""
    assert err.startswith("\ratto.train: step 10/20  loss ") and err.endswith("\n")
    last = err.rstrip("\n").split("\r")[-1]
    assert last.startswith("atto.train: step 20/20  loss ") and "val_loss " in last
    atto.train(data=names, out=work / "line", force=True, **KEYS)  # default without tqdm: nothing
    assert capfd.readouterr() == ("", "")


def test_progress_arguments_are_checked(work, names):
    with pytest.raises(atto.InvalidArgumentError, match="progress must be True, False, None or a callable"):
        atto.train(data=names, out=work / "bad", progress="yes", **KEYS)
    with pytest.raises(atto.InvalidArgumentError, match="give the callback once"):
        atto.train(data=names, out=work / "bad", progress=print, callback=print, **KEYS)
    with pytest.raises(atto.InvalidArgumentError, match="callback must be callable"):
        atto.train(data=names, out=work / "bad", callback=3, **KEYS)
    assert not (work / "bad").exists()  # refused before training
