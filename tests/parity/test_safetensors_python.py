"""Python side of tests/parity/test_harness.cpp: checks that files written by atto load in the
independent reader st.py, and that files written by st.py load in atto.

    python3 test_safetensors_python.py --case roundtrip --out OUT --in FILE_WRITTEN_BY_ATTO
    python3 test_safetensors_python.py --case selftest  --out OUT   # st.py on its own (numpy)
    python3 test_safetensors_python.py --case torch     --out OUT   # torch tensors, bf16
    python3 test_safetensors_python.py --case fail      --out OUT   # exits 3 with a message
    python3 test_safetensors_python.py --case no_output --out OUT   # exits 0, writes nothing

Any failed check raises, so the script exits non-zero and the C++ test shows the traceback.
"""

import argparse
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st  # noqa: E402


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def case_roundtrip(args):
    """Reads atto's file, checks its layout, writes each tensor * 2 plus new tensors."""
    with open(args.inp, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    check(n % 8 == 0, f"header length {n} is not a multiple of 8")
    check(raw[8:9] == b"{", "header does not start with '{'")
    tensors, meta = st.load(args.inp)
    check(meta.get("writer") == "atto", f"metadata not read: {meta}")
    out = {}
    for name, a in tensors.items():
        check(a.dtype == np.float32, f"{name}: dtype {a.dtype}")
        out[name + ".x2"] = a * 2
    out["py.arange"] = np.arange(6, dtype=np.float32).reshape(2, 3)
    out["py.f64"] = np.array([0.1, -1e-3], dtype=np.float64)
    out["py.f16"] = np.array([[1.5, -0.25]], dtype=np.float16)
    out["py.shapes"] = np.array([len(a.shape) for a in tensors.values()], dtype=np.float32)
    out_meta = {"echo." + k: v for k, v in meta.items()}
    out_meta["names"] = ",".join(tensors)  # the order st.py saw (by data offset)
    st.save(out, args.out, metadata=out_meta)


def expect_format_error(blob, tmp, what):
    with open(tmp, "wb") as f:
        f.write(blob)
    try:
        st.load(tmp)
    except st.FormatError:
        return
    finally:
        os.remove(tmp)
    raise AssertionError(f"st.load accepted a broken file ({what})")


def case_selftest(args):
    """st.py reads back what it writes (all dtypes) and rejects broken files."""
    rng = np.random.default_rng(0)
    src = {
        "f32": rng.standard_normal((3, 4)).astype(np.float32),
        "f64": rng.standard_normal(5),
        "f16": rng.standard_normal((2, 2)).astype(np.float16),
        "i64": np.arange(-3, 3, dtype=np.int64),
        "u8": np.array([0, 255], dtype=np.uint8),
        "bool": np.array([True, False]),
        "scalar": np.float32(2.5),
        "empty": np.zeros((0, 3), np.float32),
        "big_endian": np.array([1.0, 2.0], dtype=">f4"),
        "strided": np.arange(12, dtype=np.float32).reshape(3, 4).T,
    }
    blob = st.serialize(src, {"k": "v"})
    check(len(blob) >= 8 and struct.unpack("<Q", blob[:8])[0] % 8 == 0, "padding")
    tmp = args.out + ".self"
    st.save(src, tmp, metadata={"k": "v"})
    back, meta = st.load(tmp)
    os.remove(tmp)
    check(meta == {"k": "v"}, f"metadata {meta}")
    check(list(back) == list(src), f"order {list(back)}")
    for k, v in src.items():
        v = np.asarray(v)
        check(back[k].shape == v.shape and np.array_equal(back[k], v), f"{k} differs")
    good = st.serialize({"a": np.ones(2, np.float32)})
    for cut in (0, 7, 9, len(good) - 1):
        expect_format_error(good[:cut], tmp, f"cut at {cut}")
    expect_format_error(good + b"x", tmp, "trailing byte")
    expect_format_error(struct.pack("<Q", 2) + b"[]", tmp, "not an object")
    expect_format_error(struct.pack("<Q", 7) + b'{"a":1,', tmp, "bad json")
    entry = b'"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}'
    dup = b"{" + entry + b"," + entry + b"}"
    expect_format_error(struct.pack("<Q", len(dup)) + dup + b"\0" * 4, tmp, "duplicate key")
    single = b"{" + entry + b"}"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(single)) + single + b"\0" * 4)
    check(st.load(tmp)[0]["a"].tolist() == [0.0], "hand-made file")
    os.remove(tmp)
    # For atto: the float types it reads (F32, F64, F16), written by st.py.
    st.save({k: src[k] for k in ("f32", "f64", "f16", "scalar", "empty", "strided")}, args.out,
            metadata={"case": "selftest"})


def case_torch(args):
    """torch tensors (incl. bfloat16) through st.save; atto must decode them."""
    import torch
    torch.manual_seed(1234)
    x = torch.randn(4, 5)
    st.save({
        "x": x,
        "x.t": x.t(),                       # non-contiguous torch tensor
        "x.bf16": x.bfloat16(),
        "x.bf16_as_f32": x.bfloat16().float(),
        "x.f64": x.double(),
        "x.f16_as_f32": x.half().float(),
        "x.f16": x.half(),
    }, args.out, metadata={"torch": torch.__version__})
    back, _ = st.load_torch(args.out)
    check(torch.equal(back["x"], x) and torch.equal(back["x.t"], x.t()), "torch round trip")
    check(torch.equal(back["x.bf16"], x.bfloat16().float()), "bf16 decode in st.py")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--case", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--in", dest="inp")
    args = p.parse_args()
    if args.case == "fail":
        print("deliberate failure for the harness test", file=sys.stderr)
        sys.exit(3)
    if args.case == "no_output":
        return
    cases = {"roundtrip": case_roundtrip, "selftest": case_selftest, "torch": case_torch}
    if args.case not in cases:
        sys.exit(f"unknown case {args.case!r}; known: {sorted(cases)}")
    cases[args.case](args)


if __name__ == "__main__":
    main()
