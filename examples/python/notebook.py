# %% [markdown]
# # atto in a notebook: train, sample, look inside
#
# A small character-level GPT trained on names, then what it does with one name: its attention
# maps (`Model.attention`, the numbers `atto inspect` draws) and a PCA of its token embeddings.
# The cells (`# %%`) run one by one in Jupyter or VS Code, or all at once as a script:
#
#     python3 examples/python/notebook.py [--data names.txt] [--png atto_notebook.png] [--steps 1000]
#
# Needs the `atto` package (docs/python.md), numpy and matplotlib (Debian: python3-matplotlib).
# The figures go to the PNG file given by --png (matplotlib's Agg backend: no display needed; in a
# Jupyter kernel they are also shown inline).

# %%
import argparse
import re
import sys
from pathlib import Path

import matplotlib

if "ipykernel" not in sys.modules:
    matplotlib.use("Agg")  # headless: the figures go to the PNG file only
import matplotlib.pyplot as plt
import numpy as np

import atto


def repository() -> Path:
    """atto's repository: examples/python/../.. of this file; in a notebook (no __file__), the
    first folder from the current one up that holds this example (else the current one)."""
    if "__file__" in globals():
        return Path(__file__).resolve().parents[2]
    here = Path.cwd().resolve()
    return next((d for d in [here, *here.parents] if (d / "examples" / "python" / "notebook.py").is_file()), here)


REPO = repository()

parser = argparse.ArgumentParser(description="Train a small GPT on names, sample it, plot attention and embeddings")
parser.add_argument("--data", default=str(REPO.parent / "shared" / "data" / "names.txt"),
                    help="one name per line (default: ../shared/data/names.txt next to the repository; when "
                         "absent, the lowercase words of /usr/share/dict/words)")
parser.add_argument("--png", default="atto_notebook.png", help="where to save the figures")
parser.add_argument("--run", default="runs/notebook", help="the run directory to train into (overwritten)")
parser.add_argument("--steps", type=int, default=1000)
parser.add_argument("--d-model", type=int, default=64)
parser.add_argument("--n-layers", type=int, default=2)
parser.add_argument("--n-heads", type=int, default=4)
parser.add_argument("--threads", type=int, default=0, help="0 = all cores")
parser.add_argument("--text", default="emma", help="the name whose attention is drawn")
args, _ = parser.parse_known_args()  # a Jupyter kernel passes arguments of its own

# %% [markdown]
# ## Data
# `names.txt` has one name per line; a lines-mode model learns where a name starts and ends
# (`<eos>`). Without it, the README demo's fallback: Debian's word list, lowercase a-z words only.

# %%
data = Path(args.data)
run = Path(args.run)
if not data.is_file():
    words = Path("/usr/share/dict/words").read_text(encoding="utf-8").splitlines()
    run.parent.mkdir(parents=True, exist_ok=True)
    data = run.parent / "words.txt"
    data.write_text("\n".join(w for w in words if re.fullmatch(r"[a-z]+", w)) + "\n", encoding="utf-8")
print(f"training data: {data} ({sum(1 for _ in data.open(encoding='utf-8'))} lines)")

# %% [markdown]
# ## Train
# The keys are config.json's (`atto train --help`). A progress bar shows in a terminal or a
# notebook (tqdm); the result says how it went.

# %%
result = atto.train(data=data, out=run, force=True, steps=args.steps, d_model=args.d_model,
                    n_layers=args.n_layers, n_heads=args.n_heads, seed=7, threads=args.threads)
print(f"{result.steps} steps in {result.seconds:.1f} s: best {result.metric} {result.best_score:.4f} "
      f"at step {result.best_step}, {result.n_params:,} parameters")

# %% [markdown]
# ## Sample
# The same samples as `atto sample --model RUN -n 10 --seed 1 --temperature 0.8`.

# %%
m = atto.Model(run, threads=args.threads)
for s in m.generate(n=10, seed=1, temperature=0.8):
    print(s)

# %% [markdown]
# ## Attention
# `m.attention(text)` is float32 [n_layers, n_heads, T, T]: row i is where position i looks
# (each row sums to 1 over positions 0..i; later positions get 0). In lines mode the input
# starts with `<eos>`, as in training. The last layer's heads:

# %%
x = m.inspect(args.text)
labels = [m.token_text(t) for t in x.tokens]
n_layers, n_heads = x.attention.shape[:2]
fig = plt.figure(figsize=(3.2 * max(n_heads, 2), 7.5), layout="constrained")
grid = fig.add_gridspec(2, max(n_heads, 2), height_ratios=[1, 1.4])
for h in range(n_heads):
    ax = fig.add_subplot(grid[0, h])
    ax.imshow(x.attention[-1, h], cmap="viridis", vmin=0, vmax=1)
    ax.set_title(f"layer {n_layers - 1}, head {h}", fontsize=9)
    ax.set_xticks(range(len(labels)), labels, fontsize=8)
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.set_xlabel("key", fontsize=8)
    if h == 0:
        ax.set_ylabel("query", fontsize=8)

# %% [markdown]
# ## Token embeddings
# `m.token_embeddings()` is the [vocab_size, d_model] table (`m.weights()["transformer.wte.weight"]`,
# no copy). Its two principal components, by an SVD of the centred table: characters the model
# uses alike end up close (vowels, often).

# %%
emb = np.asarray(m.token_embeddings(), dtype=np.float64)
centred = emb - emb.mean(axis=0)
_, sv, vt = np.linalg.svd(centred, full_matrices=False)
xy = centred @ vt[:2].T
explained = sv[:2] ** 2 / (sv ** 2).sum()
ax = fig.add_subplot(grid[1, :])
ax.scatter(xy[:, 0], xy[:, 1], s=12, color="tab:blue")
for i, (px, py) in enumerate(xy):
    ax.annotate(m.token_text(i), (px, py), fontsize=10, xytext=(3, 3), textcoords="offset points")
ax.set_xlabel(f"PC 1 ({explained[0]:.0%} of the variance)")
ax.set_ylabel(f"PC 2 ({explained[1]:.0%})")
ax.set_title("token embeddings (wte), first two principal components", fontsize=10)
fig.suptitle(f"atto: attention on {args.text!r} and the token embeddings ({run})")

# %%
fig.savefig(args.png, dpi=110)
print(f"figures: {args.png}")
m.close()
