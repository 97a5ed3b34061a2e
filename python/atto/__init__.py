"""atto: train, sample and score small transformers from Python.

    import atto

    atto.train(data="names.txt", out="runs/names", steps=500)   # the keys of config.json
    m = atto.Model("runs/names")                               # a run directory or a GGUF file
    print(m.generate(n=5, seed=1337))                          # = atto sample -n 5 --seed 1337
    print(m.score("emma").mean_nll)                            # = atto score
    w = m.weights()["transformer.wte.weight"]                  # numpy, read-only, no copy
    a = m.attention("emma")                                    # [n_layers, n_heads, T, T], as atto inspect

A thin layer over atto's C API (include/atto/atto.h, through the extension atto._core): the same
results as the `atto` command line for the same settings. Calls that compute (train, generate,
score, logits, inspect) release the GIL. Errors are atto.Error with atto's message; bad arguments are
atto.InvalidArgumentError, which is also a ValueError. docs/python.md has the details.
"""
from __future__ import annotations

import copy
import functools
import json
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union, overload

import numpy as np

from . import _core, _progress
from ._core import Error, InvalidArgumentError

__all__ = [
    "Error",
    "Inspection",
    "InvalidArgumentError",
    "Model",
    "Progress",
    "Score",
    "TrainResult",
    "Translation",
    "train",
    "version",
    "__version__",
]

__version__: str = _core.version()

PathLike = Union[str, "os.PathLike[str]"]


def version() -> str:
    """The version of the atto library the package runs on ("0.12.0")."""
    return _core.version()


# ---- results --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Progress:
    """Training progress, handed to train()'s `progress` callback at every logged step and
    evaluation (`val_loss` is None when this step did not evaluate)."""

    step: int
    total_steps: int
    train_loss: float
    val_loss: Optional[float]
    best_score: float
    metric: str  # "val_loss" or "bleu": what best_score is
    elapsed_s: float
    tokens_per_s: float


@dataclass(frozen=True)
class TrainResult:
    """What train() returns. `interrupted` is True when the progress callback returned False:
    the run saved its state; train(..., resume=True) continues it bit for bit."""

    steps: int
    best_score: float
    metric: str
    best_step: int
    last_train_loss: float
    seconds: float
    n_params: int
    interrupted: bool
    out: str


@dataclass(frozen=True)
class Score:
    """A text's per-token log-probabilities (natural log), as `atto score` prints them. In lines
    mode the tokens are the text's, then <eos>."""

    text: str
    tokens: List[int]
    logprobs: np.ndarray = field(repr=False)  # float64, one per token
    total_nll: float  # -sum(logprobs), nats
    mean_nll: float  # total_nll / len(tokens)


@dataclass(frozen=True)
class Translation:
    """A hypothesis of Model.translate: its text and score (log-probability / GNMT length
    penalty, as `atto translate --n-best` prints it)."""

    text: str
    score: float


@dataclass(frozen=True)
class Inspection:
    """Inside one forward pass of a GPT on a text (Model.inspect): the numbers `atto inspect
    --text TEXT` draws. The input (`tokens`, T ids) is what inspect feeds: in lines mode the
    <eos> that starts a line, then the text's tokens; in stream mode the text's tokens.

    attention: float32 [n_layers, n_heads, T, T]; [l, h, i, j] is the weight that query position
    i of head h in layer l gives key position j: each row sums to 1 over j <= i, and the masked
    entries j > i are 0.
    residual_stream: float32 [n_layers + 1, T, d_model]; row 0 is the embeddings (token plus
    position, none added for rotary positions; no dropout at inference); row l (1 <= l <=
    n_layers) is block l-1's output: the input of block l, and for l = n_layers the input of
    the final norm ln_f (of lm_head in a post-norm GPT, which has no ln_f).
    The arrays are the caller's (writable; no copy was made of atto's result)."""

    text: str
    tokens: List[int]
    attention: np.ndarray = field(repr=False)
    residual_stream: np.ndarray = field(repr=False)


# ---- training -------------------------------------------------------------------------------


def train(
    data: Optional[PathLike] = None,
    out: Optional[PathLike] = None,
    *,
    resume: bool = False,
    force: bool = False,
    threads: int = 0,
    progress: Union[bool, None, Callable[[Progress], Optional[bool]]] = None,
    callback: Optional[Callable[[Progress], Optional[bool]]] = None,
    **config: Any,
) -> TrainResult:
    """Trains a model into the run directory `out`, as `atto train --data DATA --out OUT` does.

    `config` takes the keys of config.json (`atto train --help`: the flag --d-model is the key
    d_model), e.g. steps=500, d_model=64, n_layers=2, seed=7; `data` is the "data" key (for
    seq2seq: src=..., tgt=...). The same configuration and seed give the same weights as the
    command line, bit for bit.

    progress: the progress bar. None (the default) shows a tqdm bar on stderr when tqdm can be
    imported and stderr is a terminal or this runs in a Jupyter kernel; True always shows one
    (without tqdm: one line of text on stderr, rewritten at each report); False shows nothing.
    A callable is the callback (as callback=), with the default bar.

    callback(p: Progress) is called at every logged step and evaluation, alongside the bar;
    returning False stops the run after the current step (its state is saved: continue it with
    resume=True) and train() returns with interrupted=True. An exception raised in the callback,
    or Ctrl-C, also stops the run (state saved) and is raised from train().

    resume=True continues the run in `out` (config may then hold only the keys that
    `atto train --resume` accepts: steps, threads, eval_every, ...); force=True allows `out` to
    hold a run already (it is overwritten); threads: the kernels' threads (0 = the config's
    "threads", all cores by default). The GIL is released while training.
    """
    if out is None:
        raise InvalidArgumentError("train() needs out=, the run directory to write")
    if data is not None:
        config["data"] = os.fspath(data)
    for key in ("src", "tgt", "valid_src", "valid_tgt", "init_from"):
        if isinstance(config.get(key), os.PathLike):
            config[key] = os.fspath(config[key])
    _int(threads, "threads", 0, 2**31)
    bar, callback = _progress_args(progress, callback)
    try:
        config_json = json.dumps(config, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise InvalidArgumentError(f"the configuration is not JSON: {e}") from None
    display = _progress.make(bar, bool(resume))
    cb = None if display is None and callback is None else functools.partial(_report, display, callback)
    steps = None
    try:
        r = _core.train(config_json, os.fspath(out), bool(resume), bool(force), threads, cb)
        steps = r["steps"]
    finally:
        if display is not None:
            display.close(steps)
    return TrainResult(out=os.fspath(out), **r)


def _report(display: Any, callback: Optional[Callable[[Progress], Optional[bool]]],
            d: Dict[str, Any]) -> Optional[bool]:
    """One progress report of a training run: to the bar, then to the caller's callback."""
    p = Progress(**d)
    if display is not None:
        display.update(p)
    return None if callback is None else callback(p)


def _progress_args(progress: Any, callback: Any) -> Tuple[Optional[bool], Any]:
    """train()'s (bar setting, callback) from its progress= and callback= arguments."""
    if callback is not None and not callable(callback):
        raise InvalidArgumentError("callback must be callable")
    if callable(progress):
        if callback is not None:
            raise InvalidArgumentError("give the callback once: progress=callable or callback=callable")
        return None, progress
    if progress is not None and not isinstance(progress, bool):
        raise InvalidArgumentError(f"progress must be True, False, None or a callable, got {progress!r}")
    return progress, callback


# ---- models ---------------------------------------------------------------------------------

class Model:
    """A trained model: an atto run directory (atto train --out DIR) or a GGUF file, opened
    read-only. Use it as a context manager or call close() to free it at once (else when it is
    garbage-collected). One Model runs one call at a time (calls from several threads take turns;
    for parallel work open one Model per thread); the GIL is released while it computes.

        with atto.Model("runs/names") as m:
            print(m.generate(n=3))
    """

    def __init__(self, path: PathLike, *, threads: int = 0) -> None:
        """Opens `path` (a run directory or a .gguf file), validating its files against each
        other; a missing or broken one raises atto.Error naming it. threads: the kernels'
        threads for this model's calls (0 = all cores); results do not depend on it."""
        _int(threads, "threads", 0, 2**31)
        self._path = os.fspath(path)
        self._m = _core.Model(self._path, threads)
        self._info: Optional[Dict[str, Any]] = None

    # -- lifetime --
    def close(self) -> None:
        """Frees the model (its weights and tokenizers). Arrays from weights() stay valid."""
        self._m.close()

    @property
    def closed(self) -> bool:
        return self._m.closed

    def __enter__(self) -> "Model":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        if self.closed:
            return f"<atto.Model {self._path!r} (closed)>"
        i = self.info
        return (f"<atto.Model {self._path!r} {i['task']} d_model={i['d_model']} n_layers={i['n_layers']} "
                f"vocab={i['vocab_size']} params={i['n_params']}>")

    @property
    def path(self) -> str:
        return self._path

    @property
    def info(self) -> Dict[str, Any]:
        """The model's configuration: task ("gpt" or "seq2seq"), vocab_size, tgt_vocab_size,
        context (block size), n_params, d_model, n_heads, n_kv_heads (key/value heads: fewer than
        n_heads under grouped-query attention), rope_base (0 without rotary positions), n_layers,
        n_dec_layers, lines_mode, eos_token (-1 when none), and config: the run's config.json as a dict (None for a GGUF
        file)."""
        if self._info is None:
            info = self._m.info()
            cfg = os.path.join(self._path, "config.json")
            info["config"] = None
            if os.path.isdir(self._path) and os.path.isfile(cfg):
                with open(cfg, encoding="utf-8") as f:
                    info["config"] = json.load(f)
            self._info = info
        return copy.deepcopy(self._info)

    def set_threads(self, n: int) -> None:
        """The kernels' threads for this model's calls (0 = all cores); results do not depend
        on it."""
        self._m.set_threads(_int(n, "threads", 0, 2**31))

    # -- tokens --
    def tokenize(self, text: str, *, vocab: str = "source") -> List[int]:
        """Text to token ids, as training did (no end token added). A character the vocabulary
        lacks raises InvalidArgumentError naming it. vocab: "source" or (seq2seq) "target"."""
        return self._m.tokenize(_str(text, "text"), vocab)

    def detokenize(self, ids: Iterable[int], *, vocab: str = "source") -> str:
        """Token ids to text (special tokens are skipped)."""
        return self._m.detokenize(_ids(ids), vocab)

    def token_text(self, token: int, *, vocab: str = "source") -> str:
        """One token's text; special tokens by name ("<eos>")."""
        return self._m.token_text(int(token), vocab)

    # -- GPT --
    def generate(
        self,
        prompt: str = "",
        *,
        n: int = 1,
        max_tokens: int = 0,
        temperature: float = 1.0,
        top_k: int = 0,
        top_p: float = 1.0,
        min_p: float = 0.0,
        repetition_penalty: float = 1.0,
        repetition_last_n: int = 64,
        frequency_penalty: float = 0.0,
        presence_penalty: float = 0.0,
        logit_bias: Optional[Mapping[int, float]] = None,
        greedy: bool = False,
        seed: int = 1337,
        stop: Optional[Sequence[str]] = None,
        on_text: Optional[Callable[[int, str], Optional[bool]]] = None,
    ) -> List[str]:
        """n samples continuing `prompt`: exactly the texts of
        `atto sample --model PATH --prompt PROMPT -n N --seed SEED` with the same settings
        (each is the prompt followed by the sample's text; in lines mode one line, without its
        <eos>). max_tokens: new tokens per sample at most (0 = block size in lines mode, 500 in
        stream mode); stop: strings that end a sample before them; logit_bias: {token id: bias}
        added to those logits (-100 to 100, OpenAI's), frequency_penalty and presence_penalty
        OpenAI's penalties over the last repetition_last_n tokens. Bad values raise
        InvalidArgumentError (a ValueError) with atto's message. The GIL is released.

        on_text(index, piece) streams: it is called with each new piece of text of sample
        `index` (0 .. n-1) as it is generated (samples are decoded in batches, so pieces of
        different samples interleave; text that could start a stop string comes later); the
        pieces of a sample add up to its text after the prompt. Returning False ends that sample
        there. An exception raised in it (or Ctrl-C) ends generation and is raised."""
        if isinstance(stop, str):
            stop = [stop]
        args = dict(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p,
                    repetition_penalty=repetition_penalty, repetition_last_n=repetition_last_n, greedy=greedy,
                    seed=seed, max_tokens=max_tokens, stop=list(stop or []),
                    frequency_penalty=frequency_penalty, presence_penalty=presence_penalty)
        if logit_bias is not None and not isinstance(logit_bias, Mapping):
            raise InvalidArgumentError("logit_bias must be a dict of token id -> bias")
        args["logit_bias"] = {_int(t, "each logit_bias token id", -2**31, 2**31): _float(b, "each logit_bias value")
                              for t, b in (logit_bias or {}).items()}
        n = _int(n, "n", -2**63, 2**63)
        args["top_k"] = _int(top_k, "top_k", -2**31, 2**31)
        args["repetition_last_n"] = _int(repetition_last_n, "repetition_last_n", -2**31, 2**31)
        args["max_tokens"] = _int(max_tokens, "max_tokens", -2**63, 2**63)
        args["seed"] = _int(seed, "seed", 0, 2**64)
        for k in ("temperature", "top_p", "min_p", "repetition_penalty", "frequency_penalty", "presence_penalty"):
            args[k] = _float(args[k], k)
        args["greedy"] = bool(greedy)
        for s in args["stop"]:
            _str(s, "each stop string")
        if on_text is not None and not callable(on_text):
            raise InvalidArgumentError("on_text must be callable")
        return self._m.generate(_str(prompt, "prompt"), n, args, on_text)

    @overload
    def score(self, texts: str) -> Score: ...

    @overload
    def score(self, texts: Iterable[str]) -> List[Score]: ...

    def score(self, texts: Union[str, Iterable[str]]) -> Union[Score, List[Score]]:
        """Per-token log-probabilities of a text (a Score) or of each of a list of texts (a list
        of Scores), as `atto score --model PATH TEXT...` computes them (lines mode: each text
        framed as <eos> text <eos>)."""
        if isinstance(texts, str):
            return self._score_one(texts)
        return [self._score_one(_str(t, "each text")) for t in texts]

    def _score_one(self, text: str) -> Score:
        tokens, logprobs, total, mean = self._m.score(text)
        return Score(text=text, tokens=tokens, logprobs=logprobs, total_nll=total, mean_nll=mean)

    def logits(self, tokens: Iterable[int]) -> np.ndarray:
        """The next-token logits (float32, shape [vocab_size]) after a sequence of token ids (at
        most `info["context"]` of them): log_softmax(logits(ids[:i]))[ids[i]] is the log-
        probability that score() gives token i."""
        return self._m.logits(_ids(tokens))

    # -- inside the model (GPT) --
    def inspect(self, text: str) -> Inspection:
        """One forward pass on `text`, keeping what `atto inspect --text TEXT` draws: every
        layer's attention weights and the residual stream (see Inspection for what each array
        holds). The input is inspect's: in lines mode [<eos>] + the text's tokens (an empty text
        is the <eos> alone), in stream mode the text's tokens. A seq2seq model, an input longer
        than the block size (info["context"]: atto inspect would keep its last tokens, this
        refuses), an empty stream-mode text or a character the vocabulary lacks raise
        InvalidArgumentError naming what is wrong. The GIL is released."""
        tokens, attention, residual = self._m.inspect(_str(text, "text"))
        return Inspection(text=text, tokens=tokens, attention=attention, residual_stream=residual)

    def attention(self, text: str) -> np.ndarray:
        """The attention weights of a forward pass on `text` (inspect(text).attention): float32
        [n_layers, n_heads, T, T], [l, h, i, j] the weight query i gives key j in head h of
        layer l; each row sums to 1 over the causal prefix j <= i, and entries j > i are 0.
        T counts inspect's input: in lines mode the <eos> that starts the text, then its tokens,
        as atto inspect's attention maps label them."""
        return self.inspect(text).attention

    def residual_stream(self, text: str) -> np.ndarray:
        """The residual stream of a forward pass on `text` (inspect(text).residual_stream):
        float32 [n_layers + 1, T, d_model]. Row 0: the embeddings (token + position, before any
        dropout); row l, 1 <= l <= n_layers: the output of block l-1 (the stream entering block
        l; for l = n_layers the input of ln_f, so lm_head(ln_f(row n_layers)) are the logits)."""
        return self.inspect(text).residual_stream

    def token_embeddings(self) -> np.ndarray:
        """A GPT's token embedding table, float32 [vocab_size, d_model]: weights()
        ["transformer.wte.weight"], read-only without a copy (row i is token i: token_text(i))."""
        if self.info["task"] != "gpt":
            raise InvalidArgumentError("token_embeddings() is for a GPT; this model is seq2seq: see weights()")
        return self._m.weights()["transformer.wte.weight"]

    # -- seq2seq --
    @overload
    def translate(self, sources: str, *, beam: int = ..., n_best: int = ..., length_penalty: float = ...,
                  max_len_a: float = ..., max_len_b: int = ...) -> List[Translation]: ...

    @overload
    def translate(self, sources: Iterable[str], *, beam: int = ..., n_best: int = ..., length_penalty: float = ...,
                  max_len_a: float = ..., max_len_b: int = ...) -> List[List[Translation]]: ...

    def translate(
        self,
        sources: Union[str, Iterable[str]],
        *,
        beam: int = 5,
        n_best: int = 1,
        length_penalty: float = 0.6,
        max_len_a: float = 1.5,
        max_len_b: int = 10,
    ) -> Union[List[Translation], List[List[Translation]]]:
        """Translates with a seq2seq model, as `atto translate --beam BEAM --n-best N` does:
        for one source (a str) its n_best hypotheses, best first; for a list of sources, such a
        list per source. beam 1 is greedy decoding; the target length is at most
        max_len_a * source length + max_len_b tokens. The GIL is released."""
        one = isinstance(sources, str)
        texts = [sources] if one else [_str(s, "each source") for s in sources]
        params = dict(beam=_int(beam, "beam", -2**31, 2**31), n_best=_int(n_best, "n_best", -2**31, 2**31),
                      length_penalty=_float(length_penalty, "length_penalty"),
                      max_len_a=_float(max_len_a, "max_len_a"), max_len_b=_int(max_len_b, "max_len_b", -2**31, 2**31))
        out = [[Translation(t, s) for t, s in hyps] for hyps in self._m.translate(texts, params)]
        return out[0] if one else out

    def translate_logits(self, source: str, prefix: Iterable[int] = ()) -> np.ndarray:
        """A seq2seq model's next-token logits (float32, shape [tgt_vocab_size]) for a source text
        and a target prefix of token ids (vocab="target" ids, without <bos>): the decoder's
        distribution that translate() searches."""
        return self._m.translate_logits(_str(source, "source"), _ids(prefix))

    # -- weights --
    def weights(self) -> Dict[str, np.ndarray]:
        """Every tensor of the model by name (the names and shapes of its model.safetensors:
        nanoGPT's for a GPT), as read-only float32 numpy arrays over the model's own memory (no
        copy; they stay valid after close()). np.array(w) makes a writable copy. The matrices of
        a quantized GGUF file (q8_0, q4_0, Q4_K, Q5_K, Q6_K), kept quantized, come dequantized (a
        float copy each)."""
        return self._m.weights()


def _int(v: Any, what: str, lo: int, hi: int) -> int:
    """v as an int in [lo, hi), else InvalidArgumentError."""
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise InvalidArgumentError(f"{what} must be an int, got {v!r}")
    if not lo <= int(v) < hi:
        raise InvalidArgumentError(f"{what} must be in [{lo}, {hi}), got {v}")
    return int(v)


def _float(v: Any, what: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)):
        raise InvalidArgumentError(f"{what} must be a number, got {v!r}")
    return float(v)


def _str(s: Any, what: str) -> str:
    if not isinstance(s, str):
        raise InvalidArgumentError(f"{what} must be a str, got {type(s).__name__}")
    return s


def _ids(ids: Iterable[int]) -> List[int]:
    if isinstance(ids, (str, bytes)):
        raise InvalidArgumentError("token ids must be a sequence of ints, not a string")
    out = []
    for t in ids:
        if isinstance(t, bool) or not isinstance(t, (int, np.integer)):
            raise InvalidArgumentError(f"token ids must be ints, got {t!r}")
        t = int(t)
        if not -2**31 <= t < 2**31:
            raise InvalidArgumentError(f"token {t} is outside [0, vocab_size)")
        out.append(t)
    return out

