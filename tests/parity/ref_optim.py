"""PyTorch reference for tests/parity/test_parity_optim.cpp: three optimizer steps with gradient
clipping, on four parameters of the four kinds atto groups by.

    /usr/bin/python3 ref_optim.py --case all --out ref.safetensors   # or one of adamw, adam, sgd

Every tensor name and metadata key below is prefixed with "<case>." (e.g. "adamw.init.weight",
"sgd.lr"), so one run (one torch import) serves every test.

Parameters (float32, seeded): weight [8, 5] (decayed group), bias [5], norm [5] (a norm weight),
embedding [11, 5] (the no-decay group). Each step s = 0, 1, 2:
    grads <- seeded random gradients, scaled by GRAD_SCALE[s]; at step 1 the embedding gets
             no gradient (grad None: PyTorch skips it, atto must too)
    norm_s = torch.nn.utils.clip_grad_norm_(params, MAX_NORM)
    opt.step()
The scales make clipping active at steps 0 and 2 and inactive at step 1 (checked below).

Written tensors:
    init.<p>              the parameters before step 0
    grad.<s>.<p>          the gradient given at step s (before clipping; absent = None)
    norm.<s>              [1] the total norm clip_grad_norm_ returned at step s
    param.<s>.<p>         the parameters after step s
    state.<p>.<slot>      the optimizer state after the last step (exp_avg, exp_avg_sq or
                          momentum_buffer)
    state.<p>.step        [1] Adam/AdamW: that parameter's update count (the embedding's is 2)
Metadata: the hyperparameters (lr, weight_decay, max_norm, beta1, beta2, eps, momentum, nesterov)
as strings, so the C++ side reads them instead of repeating them.
"""

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st  # noqa: E402

SHAPES = {"weight": (8, 5), "bias": (5,), "norm": (5,), "embedding": (11, 5)}
DECAYED = ["weight"]
NOT_DECAYED = ["bias", "norm", "embedding"]
GRAD_SCALE = [3.0, 0.05, 0.5]
MAX_NORM = 1.0
STEPS = 3

CASES = {
    "adamw": dict(lr=1e-2, weight_decay=0.1, beta1=0.9, beta2=0.95, eps=1e-8),
    "adam": dict(lr=1e-2, weight_decay=0.1, beta1=0.9, beta2=0.999, eps=1e-8),
    "sgd": dict(lr=0.1, weight_decay=0.01, momentum=0.9, nesterov=True),
}


def make_optimizer(case, params, h):
    groups = [{"params": [params[n] for n in DECAYED], "weight_decay": h["weight_decay"]},
              {"params": [params[n] for n in NOT_DECAYED], "weight_decay": 0.0}]
    if case == "adamw":
        return torch.optim.AdamW(groups, lr=h["lr"], betas=(h["beta1"], h["beta2"]), eps=h["eps"])
    if case == "adam":
        return torch.optim.Adam(groups, lr=h["lr"], betas=(h["beta1"], h["beta2"]), eps=h["eps"])
    return torch.optim.SGD(groups, lr=h["lr"], momentum=h["momentum"], nesterov=h["nesterov"])


def run_case(case):
    """The tensors and metadata of one case (names and keys prefixed with "<case>.")."""
    h = CASES[case]
    torch.manual_seed(1234)
    params = {n: torch.randn(s).requires_grad_(True) for n, s in SHAPES.items()}
    out = {f"init.{n}": p.detach().clone() for n, p in params.items()}
    opt = make_optimizer(case, params, h)

    for s in range(STEPS):
        for n, p in params.items():
            if s == 1 and n == "embedding":
                p.grad = None
                continue
            p.grad = torch.randn(p.shape) * GRAD_SCALE[s]
            out[f"grad.{s}.{n}"] = p.grad.clone()
        norm = torch.nn.utils.clip_grad_norm_(list(params.values()), MAX_NORM)
        clipped = float(norm) > MAX_NORM
        if clipped != (s != 1):
            sys.exit(f"{case} step {s}: norm {float(norm)}: clipping should be "
                     f"{'inactive' if s == 1 else 'active'}; adjust GRAD_SCALE")
        out[f"norm.{s}"] = norm.reshape(1).float()
        opt.step()
        for n, p in params.items():
            out[f"param.{s}.{n}"] = p.detach().clone()

    for n, p in params.items():
        for slot, t in opt.state[p].items():
            if slot == "step":  # Adam's per-parameter update count, a 0-d tensor
                out[f"state.{n}.step"] = torch.as_tensor(t).reshape(1).float()
            elif torch.is_tensor(t):
                out[f"state.{n}.{slot}"] = t.clone()

    meta = {k: str(v) for k, v in h.items()}
    meta["max_norm"] = str(MAX_NORM)
    meta["steps"] = str(STEPS)
    return ({f"{case}.{k}": v for k, v in out.items()},
            {f"{case}.{k}": v for k, v in meta.items()})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", required=True, choices=sorted(CASES) + ["all"])
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    tensors, meta = {}, {}
    for case in (sorted(CASES) if args.case == "all" else [args.case]):
        t, m = run_case(case)
        tensors.update(t)
        meta.update(m)
    st.save(tensors, args.out, metadata=meta)


if __name__ == "__main__":
    main()
