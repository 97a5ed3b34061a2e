"""Fixtures of the atto package's tests (ctest python.package: tests/python/run.sh). The atto
program under test is $ATTO_CLI; the runs are trained once per session (a few dozen steps of a
tiny GPT on generated names, as tests/cli/lib.sh's write_names makes them)."""
import json
import os
import subprocess
from pathlib import Path

import pytest

# The tiny model of tests/cli/test_library.sh, as flags of `atto train` and as keys of train().
TINY_FLAGS = ["--steps", "60", "--d-model", "32", "--n-heads", "2", "--n-layers", "1", "--eval-every", "30"]
TINY_KEYS = dict(steps=60, d_model=32, n_heads=2, n_layers=1, eval_every=30)


def write_names(path, n=300):
    """tests/cli/lib.sh's write_names: n pseudo-names from syllables, the same LCG."""
    syl = ["ma", "ri", "an", "el", "jo", "li", "sa", "on", "ka", "te"]
    x, lines = 7, []
    for _ in range(n):
        x = (x * 1103515245 + 12345) % 2147483648
        k = x % 3 + 1
        w = ""
        for _ in range(k):
            x = (x * 1103515245 + 12345) % 2147483648
            w += syl[x % 10]
        lines.append(w)
    Path(path).write_text("\n".join(lines) + "\n")


class Cli:
    """The atto program under test."""

    def __init__(self, path):
        self.path = path

    def __call__(self, *args, check=True, stdin=None):
        env = dict(os.environ, OMP_NUM_THREADS="1")
        r = subprocess.run([self.path, *map(str, args)], capture_output=True, text=True, env=env, input=stdin)
        if check and r.returncode != 0:
            raise AssertionError(f"atto {' '.join(map(str, args))} failed ({r.returncode}): {r.stderr}")
        return r

    def json(self, *args, stdin=None):
        return json.loads(self(*args, "--json", stdin=stdin).stdout)


@pytest.fixture(scope="session")
def cli():
    path = os.environ.get("ATTO_CLI")
    if not path or not os.access(path, os.X_OK):
        pytest.fail("set ATTO_CLI to the atto program of the build under test (tests/python/run.sh does)")
    return Cli(path)


@pytest.fixture(scope="session")
def work(tmp_path_factory):
    d = tmp_path_factory.mktemp("atto")
    write_names(d / "names.txt")
    return d


@pytest.fixture(scope="session")
def names(work):
    return work / "names.txt"


@pytest.fixture(scope="session")
def run_dir(cli, work, names):
    """A lines-mode GPT run trained by the command line (the samples' and scores' reference)."""
    out = work / "run"
    cli("train", "--data", names, "--out", out, *TINY_FLAGS, "--threads", "1", "-q")
    return out


@pytest.fixture(scope="session")
def stream_dir(cli, work, names):
    """A stream-mode run: a sample is several lines of text."""
    out = work / "stream"
    cli("train", "--data", names, "--out", out, "--mode", "stream", *TINY_FLAGS, "--threads", "1", "-q")
    return out


def open_model(path):
    """A fixture's body: the model at `path` (one thread), closed after the session."""
    import atto

    with atto.Model(path, threads=1) as m:
        yield m


@pytest.fixture(scope="session")
def model(run_dir):
    yield from open_model(run_dir)


@pytest.fixture(scope="session")
def s2s_dir(cli, work):
    """A tiny encoder-decoder on tests/cli/lib.sh's write_toy pairs (repeated)."""
    src = ["hello my name", "hello messi", "my name is messi"]
    tgt = ["hola mi nombre", "hola messi", "mi nombre es messi"]
    (work / "toy.src").write_text("\n".join(src * 8) + "\n")
    (work / "toy.tgt").write_text("\n".join(tgt * 8) + "\n")
    out = work / "s2s"
    cli("train", "--task", "seq2seq", "--src", work / "toy.src", "--tgt", work / "toy.tgt", "--out", out,
        "--steps", "40", "--d-model", "32", "--n-heads", "2", "--n-layers", "1", "--threads", "1", "-q")
    return out
