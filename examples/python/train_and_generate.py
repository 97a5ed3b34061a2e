#!/usr/bin/env python3
"""train_and_generate.py: the atto package (python/, docs/python.md) end to end, as the C++ example
examples/cpp/train_and_generate.cpp does it through atto.hpp.

    train_and_generate.py train DATA OUT_DIR    trains a tiny GPT on DATA (one name per line) into
                                                OUT_DIR, printing its progress, then loads the run
                                                and prints 10 samples (seed 42)
    train_and_generate.py score RUN_DIR TEXT... the total negative log-likelihood of each text, in
                                                the words of `atto score --model RUN_DIR TEXT...`

Install the package first (docs/python.md): pip install --no-build-isolation ./python, or
PY=$(scripts/python-env BUILD_DIR | tail -1) and run this with $PY. Errors are atto.Error with
atto's message (atto.InvalidArgumentError, also a ValueError, for bad arguments).
"""
import sys

import atto


def show(p: atto.Progress) -> bool:
    line = f"step {p.step}/{p.total_steps}  train loss {p.train_loss:.4f}"
    if p.val_loss is not None:
        line += f"  val loss {p.val_loss:.4f}"
    print(line)
    return True  # False would stop here (the run is saved; resume it with resume=True)


def train_and_generate(data: str, out: str) -> int:
    r = atto.train(data=data, out=out, force=True, threads=1, progress=show,
                   steps=60, d_model=32, n_heads=2, n_layers=1, log_every=10, eval_every=30)
    print(f"trained {r.steps} steps in {r.seconds:.2f} s: {r.n_params} parameters, "
          f"best {'BLEU' if r.metric == 'bleu' else 'val loss'} {r.best_score:.4f} at step {r.best_step}")
    with atto.Model(out, threads=1) as m:
        for s in m.generate(n=10, seed=42):
            print(s)
    return 0


def score(run_dir: str, texts: list) -> int:
    with atto.Model(run_dir) as m:
        for s in m.score(texts):
            print(f"{s.text}\n  total -log p {s.total_nll:.4f} nats over {len(s.tokens)} tokens, "
                  f"mean {s.mean_nll:.4f} nats/token")
    return 0


def main(argv) -> int:
    try:
        if len(argv) == 4 and argv[1] == "train":
            return train_and_generate(argv[2], argv[3])
        if len(argv) >= 4 and argv[1] == "score":
            return score(argv[2], argv[3:])
    except atto.Error as e:
        print(f"train_and_generate.py: {e} ({e.status})", file=sys.stderr)
        return 1
    print(f"usage: {argv[0]} train DATA OUT_DIR\n       {argv[0]} score RUN_DIR TEXT...", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
