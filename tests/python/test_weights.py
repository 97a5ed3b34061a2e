"""Model.weights(): the tensors of model.safetensors, read-only, without a copy."""
import json
import struct

import numpy as np
import pytest

import atto


def read_safetensors(path):
    """name -> float32 array, read with the format's own rules (8-byte header length, JSON header)."""
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        assert t["dtype"] == "F32", (name, t["dtype"])
        a, b = t["data_offsets"]
        out[name] = np.frombuffer(body[a:b], dtype="<f4").reshape(t["shape"])
    return out


def test_weights_equal_model_safetensors(run_dir, model):
    want = read_safetensors(run_dir / "model.safetensors")
    got = model.weights()
    assert sorted(got) == sorted(want)
    for name, w in want.items():
        assert got[name].dtype == np.float32
        assert got[name].shape == w.shape, name
        np.testing.assert_array_equal(got[name], w, err_msg=name)


def test_weights_are_read_only_views_that_outlive_the_model(run_dir):
    m = atto.Model(run_dir)
    w = m.weights()
    a = w["transformer.wte.weight"]
    assert not a.flags.writeable and not a.flags.owndata  # a view of atto's memory
    with pytest.raises(ValueError):
        a[0, 0] = 1.0
    again = m.weights()["transformer.wte.weight"]
    assert again.ctypes.data == a.ctypes.data  # the same memory both times: no copy
    before = a.copy()
    m.close()
    del w, again
    np.testing.assert_array_equal(a, before)  # still valid after the model is freed
    c = np.array(a)
    c[0, 0] = 1.0  # a copy is writable
