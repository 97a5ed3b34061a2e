"""atto.Model against the atto command line: samples, scores, logits, tokens, info."""
import inspect
import threading
import time

import numpy as np
import pytest

import atto


def cli_samples(cli, path, n, seed, prompt=None, **flags):
    args = ["sample", "--model", path, "-n", n, "--seed", seed, "--threads", "1"]
    if prompt is not None:
        args += ["--prompt", prompt]
    for k, v in flags.items():
        args += [f"--{k.replace('_', '-')}"] + ([] if v is True else [v])
    return [s["text"] for s in cli.json(*args)["samples"]]


@pytest.mark.parametrize("n,seed,prompt,flags", [
    (7, 11, None, {}),
    (20, 3, "ma", {}),
    (300, 3, "ma", {}),  # more than one batch of 256
    (12, 5, "jo", dict(temperature=0.7, top_k=5, top_p=0.9)),
    (8, 9, None, dict(min_p=0.1, repetition_penalty=1.3, repetition_last_n=4, max_tokens=4)),
    (3, 1, "ka", dict(greedy=True)),
    (10, 6, "ma", dict(frequency_penalty=1.2, presence_penalty=-0.4, repetition_last_n=8)),
])
def test_generate_equals_atto_sample(cli, run_dir, model, n, seed, prompt, flags):
    want = cli_samples(cli, run_dir, n, seed, prompt, **flags)
    got = model.generate(prompt or "", n=n, seed=seed, **flags)
    assert len(got) == n
    assert got == want


def test_generate_logit_bias_equals_atto_sample(cli, run_dir, model):
    a, z = model.tokenize("a")[0], model.tokenize("k")[0]
    got = model.generate("ma", n=6, seed=2, logit_bias={a: -100, z: 2.5})
    assert got == cli_samples(cli, run_dir, 6, 2, "ma", logit_bias=f"{a}=-100", **{"logit-bias": f"{z}=2.5"})
    assert got != model.generate("ma", n=6, seed=2)
    assert all("a" not in s[2:] for s in got)  # -100: kept out
    assert model.generate("ma", n=1, seed=2, max_tokens=4, logit_bias={z: 100}) == ["makkkk"]  # +100: forced


def test_generate_stream_mode_equals_atto_sample(cli, stream_dir):
    with atto.Model(stream_dir, threads=1) as m:
        want = cli_samples(cli, stream_dir, 3, 5, max_tokens=40)
        got = m.generate(n=3, seed=5, max_tokens=40)
        assert got == want and any("\n" in s for s in got)
        assert m.generate("ma", n=2, seed=5) == cli_samples(cli, stream_dir, 2, 5, "ma")


def test_generate_default_seed_and_stop(cli, run_dir, model):
    assert model.generate(n=5) == cli_samples(cli, run_dir, 5, 1337)
    one = model.generate("ma", n=1, seed=4)[0]
    cut = one[2:][1:2]  # a character of the sample's own text
    if cut:
        stopped = model.generate("ma", n=1, seed=4, stop=[cut])[0]
        assert one.startswith(stopped) and cut not in stopped[2:]


def test_sampler_defaults_are_the_c_apis():
    from atto import _core

    sig = inspect.signature(atto.Model.generate).parameters
    for key, value in _core.sample_defaults().items():
        assert sig[key].default == pytest.approx(value), key


def test_score_equals_atto_score(cli, run_dir, model):
    texts = ["mari", "jo", "ka", "tesa"]
    want = cli.json("score", "--model", run_dir, *texts)["texts"]
    got = model.score(texts)
    assert [s.text for s in got] == texts
    for g, w in zip(got, want):
        assert g.tokens == [t["id"] for t in w["tokens"]]
        np.testing.assert_allclose(g.logprobs, [t["logprob"] for t in w["tokens"]], rtol=1e-12, atol=0)
        assert g.total_nll == pytest.approx(w["total_nll"], rel=1e-12)
        assert g.mean_nll == pytest.approx(w["mean_nll"], rel=1e-12)
    one = model.score("mari")
    assert isinstance(one, atto.Score) and one.tokens == got[0].tokens


def test_logits_agree_with_score(model):
    info = model.info
    s = model.score("mariel")
    context = [info["eos_token"]]  # lines mode: each text is framed as <eos> text <eos>
    for tok, lp in zip(s.tokens, s.logprobs):
        logits = model.logits(context)
        assert logits.dtype == np.float32 and logits.shape == (info["vocab_size"],)
        z = logits.astype(np.float64)
        logp = z - (z.max() + np.log(np.exp(z - z.max()).sum()))
        assert logp[tok] == pytest.approx(lp, abs=1e-5)
        context.append(tok)
    np.testing.assert_array_equal(model.logits(np.array(context[:3])), model.logits(context[:3]))


def test_tokenize_detokenize(cli, run_dir, model):
    ids = model.tokenize("mariel")
    assert ids == cli.json("tokenize", "--model", run_dir, stdin="mariel")["ids"]
    assert model.detokenize(ids) == "mariel"
    assert [model.token_text(i) for i in ids] == list("mariel")
    assert model.token_text(model.info["eos_token"]) == "<eos>"
    assert model.detokenize([]) == "" and model.tokenize("") == []


def test_info(run_dir, model):
    i = model.info
    assert i["task"] == "gpt" and i["lines_mode"] is True
    assert (i["d_model"], i["n_heads"], i["n_layers"], i["n_dec_layers"]) == (32, 2, 1, 0)
    assert i["vocab_size"] == i["config"]["model"]["vocab_size"]
    assert i["context"] == i["config"]["model"]["block_size"]
    unique = {w.ctypes.data: w.size for w in model.weights().values()}  # a tied weight once
    assert i["n_params"] == sum(unique.values())
    assert "atto.Model" in repr(model)


def test_gguf_file(cli, run_dir, work):
    gguf = work / "names.gguf"
    cli("export", "--model", run_dir, "--out", gguf)
    with atto.Model(gguf) as m:
        assert m.info["config"] is None and m.info["d_model"] == 32
        assert m.generate(n=6, seed=2) == cli_samples(cli, gguf, 6, 2)


def test_generate_releases_the_gil(run_dir):
    with atto.Model(run_dir, threads=1) as m:
        ticks = 0
        th = threading.Thread(target=m.generate, kwargs=dict(n=3000, seed=1))  # ~50 ms or more
        th.start()
        while th.is_alive():  # this loop runs only while generate() does not hold the GIL
            ticks += 1
            time.sleep(0.001)
        th.join()
        assert ticks >= 5, ticks


def test_calls_from_threads_take_turns(model):
    want = model.generate(n=30, seed=8)
    results = [None] * 4

    def work(i):
        results[i] = model.generate(n=30, seed=8)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [want] * 4


def test_close_waits_for_a_running_call(run_dir):
    m = atto.Model(run_dir, threads=1)
    want = m.generate(n=500, seed=3)
    got = []
    th = threading.Thread(target=lambda: got.append(m.generate(n=500, seed=3)))
    th.start()
    time.sleep(0.005)
    m.close()  # waits for the generation under way (no deadlock with its callback taking the GIL)
    th.join()
    assert got == [want] and m.closed


def test_ctrl_c_ends_generation(run_dir):
    import _thread

    with atto.Model(run_dir, threads=1) as m:
        t0 = time.perf_counter()
        m.generate(n=500, seed=1)
        n = 500 * max(20, int(2.0 / (time.perf_counter() - t0)))  # ~2 s of samples, unless interrupted
        started = threading.Event()

        def interrupt():
            started.wait()
            time.sleep(0.1)  # well inside generate()
            _thread.interrupt_main()

        th = threading.Thread(target=interrupt)
        th.start()
        t0 = time.perf_counter()
        with pytest.raises(KeyboardInterrupt):
            started.set()
            m.generate(n=n, seed=1)
        assert time.perf_counter() - t0 < 1.5
        th.join()
        assert m.generate(n=5, seed=2) == m.generate(n=5, seed=2)  # still usable


def test_streaming_pieces_add_up_to_the_samples(model, stream_dir):
    pieces = {}
    samples = model.generate("ma", n=40, seed=11, on_text=lambda i, p: pieces.setdefault(i, []).append(p))
    assert samples == model.generate("ma", n=40, seed=11)  # streaming changes nothing
    assert ["ma" + "".join(pieces.get(i, [])) for i in range(40)] == samples
    with atto.Model(stream_dir, threads=1) as m:
        got = {}
        samples = m.generate(n=3, seed=5, max_tokens=40, on_text=lambda i, p: got.setdefault(i, []).append(p))
        assert ["".join(got[i]) for i in range(3)] == samples


def test_streaming_callback_ends_a_sample_or_raises(model):
    full = model.generate(n=1, seed=6, max_tokens=8)[0]
    short = model.generate(n=1, seed=6, max_tokens=8, on_text=lambda i, p: False)[0]
    assert len(short) == 1 and full.startswith(short)  # ended after its first piece

    def boom(i, p):
        raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        model.generate(n=5, on_text=boom)
    with pytest.raises(ValueError, match="callable"):
        model.generate(on_text=3)
