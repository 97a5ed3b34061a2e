"""A small, independent safetensors reader and writer (numpy; torch tensors accepted).

Written from the format description (github.com/huggingface/safetensors, "Format"), not from
any implementation, so that files written by atto are checked by a second reader. Debian has no
`safetensors` Python package.

    import st
    st.save({"w": torch.randn(2, 3), "b": np.zeros(3, np.float32)}, "ref.safetensors",
            metadata={"case": "linear"})
    tensors, metadata = st.load("ref.safetensors")     # dict name -> numpy array, file order
    tensors = st.load_torch("ref.safetensors")[0]      # same, as torch tensors

Format: 8-byte little-endian unsigned header length N; N bytes of UTF-8 JSON object
{"__metadata__": {str: str}, name: {"dtype", "shape", "data_offsets": [begin, end]}, ...}
(padded with spaces to a multiple of 8 bytes); then the data section, each tensor row-major,
little-endian, at [begin, end) relative to the section start, tensors covering it exactly.

save() writes tensors in the dict's order, contiguously. bfloat16 torch tensors are written as
BF16; load() returns BF16 as float32 (numpy has no bfloat16). atto reads F32, F16, BF16, F64.
"""

import json
import math
import os
import struct

import numpy as np

# safetensors dtype name <-> numpy dtype (explicitly little-endian).
_NUMPY_OF = {
    "F64": np.dtype("<f8"), "F32": np.dtype("<f4"), "F16": np.dtype("<f2"),
    "I64": np.dtype("<i8"), "I32": np.dtype("<i4"), "I16": np.dtype("<i2"), "I8": np.dtype("i1"),
    "U64": np.dtype("<u8"), "U32": np.dtype("<u4"), "U16": np.dtype("<u2"), "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}
_MAX_HEADER = 100_000_000


class FormatError(ValueError):
    """A file that does not follow the safetensors format."""


def _encode(name, x):
    """(dtype name, little-endian contiguous bytes, shape) of a numpy array or torch tensor."""
    if hasattr(x, "detach"):  # a torch tensor; torch is imported only by callers that use it
        t = x.detach().cpu().contiguous()
        if str(t.dtype) == "torch.bfloat16":
            import torch
            bits = t.view(torch.int16).numpy().view(np.uint16)
            return "BF16", bits.astype("<u2").tobytes(), list(t.shape)
        x = t.numpy()
    a = np.asarray(x)
    little = a.dtype.newbyteorder("<") if a.dtype.byteorder == ">" else a.dtype
    dtype = next((n for n, dt in _NUMPY_OF.items() if dt == little), None)
    if dtype is None:
        raise TypeError(f"tensor {name!r}: dtype {a.dtype} has no safetensors equivalent here")
    data = np.ascontiguousarray(a, dtype=_NUMPY_OF[dtype]).tobytes()
    return dtype, data, list(a.shape)


def serialize(tensors, metadata=None):
    """The bytes of a safetensors file holding `tensors` (dict name -> array) in dict order."""
    header = {}
    if metadata:
        for k, v in metadata.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise TypeError(f"metadata must map str to str, got {k!r}: {v!r}")
        header["__metadata__"] = dict(metadata)
    chunks, offset = [], 0
    for name, x in tensors.items():
        if not isinstance(name, str) or not name or name == "__metadata__":
            raise ValueError(f"bad tensor name {name!r}")
        dtype, data, shape = _encode(name, x)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(chunks)


def save(tensors, path, metadata=None):
    """Writes `tensors` to `path` (through a temporary file and a rename)."""
    blob = serialize(tensors, metadata)
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(blob)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        dup = next(k for k in keys if keys.count(k) > 1)
        raise FormatError(f"the header has the key {dup!r} twice")
    return dict(pairs)


def _parse_header(buf, path):
    if len(buf) < 8:
        raise FormatError(f"{path}: {len(buf)} bytes, fewer than the 8-byte header length")
    (n,) = struct.unpack("<Q", buf[:8])
    if n > _MAX_HEADER or n > len(buf) - 8:
        raise FormatError(f"{path}: header length {n} does not fit a file of {len(buf)} bytes")
    try:
        header = json.loads(bytes(buf[8:8 + n]).decode("utf-8"), object_pairs_hook=_no_duplicates)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise FormatError(f"{path}: the header is not UTF-8 JSON: {e}") from None
    if not isinstance(header, dict):
        raise FormatError(f"{path}: the header is not a JSON object")
    return header, 8 + n


def _check_entry(path, name, e, data_size):
    dtype = e.get("dtype") if isinstance(e, dict) else None
    if not isinstance(dtype, str) or (dtype not in _NUMPY_OF and dtype != "BF16"):
        raise FormatError(f"{path}: tensor {name!r}: missing or unknown dtype in {e!r}")
    shape, offs = e.get("shape"), e.get("data_offsets")
    if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
        raise FormatError(f"{path}: tensor {name!r}: bad shape {shape!r}")
    if (not isinstance(offs, list) or len(offs) != 2
            or not all(type(o) is int and o >= 0 for o in offs)):
        raise FormatError(f"{path}: tensor {name!r}: bad data_offsets {offs!r}")
    itemsize = 2 if dtype == "BF16" else _NUMPY_OF[dtype].itemsize
    begin, end = offs
    if not begin <= end <= data_size or end - begin != math.prod(shape) * itemsize:
        raise FormatError(f"{path}: tensor {name!r}: data_offsets {offs} do not fit "
                          f"shape {shape} of {dtype} in a data section of {data_size} bytes")


def load(path):
    """Reads a safetensors file: ({name: numpy array} in data order, {metadata})."""
    with open(path, "rb") as f:
        buf = f.read()
    header, start = _parse_header(buf, path)
    metadata = header.pop("__metadata__", {})
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise FormatError(f"{path}: __metadata__ must map strings to strings")
    data = memoryview(buf)[start:]
    for name, e in header.items():
        _check_entry(path, name, e, len(data))
    order = sorted(header, key=lambda k: tuple(header[k]["data_offsets"]))
    cursor = 0
    for name in order:
        begin, end = header[name]["data_offsets"]
        if begin != cursor:
            raise FormatError(f"{path}: tensor {name!r} starts at {begin}, expected {cursor} "
                              "(gap or overlap)")
        cursor = end
    if cursor != len(data):
        raise FormatError(f"{path}: tensors cover {cursor} of {len(data)} data bytes")
    out = {}
    for name in order:
        e = header[name]
        begin, end = e["data_offsets"]
        if e["dtype"] == "BF16":
            bits = np.frombuffer(data[begin:end], dtype="<u2").astype(np.uint32) << 16
            arr = bits.view(np.float32)
        else:
            arr = np.frombuffer(data[begin:end], dtype=_NUMPY_OF[e["dtype"]]).copy()
        out[name] = arr.reshape(e["shape"])
    return out, metadata


def load_torch(path):
    """load(), with torch tensors instead of numpy arrays."""
    import torch
    tensors, metadata = load(path)
    return {k: torch.from_numpy(np.array(v)) for k, v in tensors.items()}, metadata
