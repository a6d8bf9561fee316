"""gpp_safetensors: reads and writes the safetensors format with numpy only,
for Debian 12, which has no python3-safetensors package.

    import sys; sys.path.insert(0, "/path/to/gpp/scripts")
    from gpp_safetensors import load_file
    model.load_state_dict(load_file("w.safetensors"), strict=True)

The format (https://huggingface.co/docs/safetensors, "Format"): u64 N
(little-endian), N bytes of UTF-8 JSON mapping each tensor name to
{"dtype", "shape", "data_offsets": [begin, end]} (offsets into the data
after the header) plus an optional "__metadata__" of strings, then the data.
load_file returns torch tensors when torch is importable (framework="pt",
the default), numpy arrays with framework="np"; save_file writes either.
Errors (a truncated or corrupt file, overlapping or out-of-range offsets, an
unknown dtype) raise ValueError naming the file and the tensor."""
import json
import struct

import numpy as np

_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2",
           "I8": "i1", "U8": "u1", "BOOL": "?"}
_NAMES = {np.dtype(v).str: k for k, v in _DTYPES.items()}
_HEADER_MAX = 100 << 20


def read_header(path):
    """(header dict without __metadata__, metadata dict, data bytes)."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError(f"{path}: {len(blob)} bytes: not a safetensors file (truncated)")
    (n,) = struct.unpack("<Q", blob[:8])
    if n > _HEADER_MAX or 8 + n > len(blob):
        raise ValueError(f"{path}: header length {n} exceeds the {len(blob)}-byte file "
                         "(truncated or not safetensors)")
    try:
        hdr = json.loads(blob[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: the header is not JSON ({e})") from None
    if not isinstance(hdr, dict):
        raise ValueError(f"{path}: the header is not a JSON object")
    meta = hdr.pop("__metadata__", {}) or {}
    return hdr, meta, blob[8 + n:]


def load_file(path, framework="pt"):
    """Every tensor of the file by name, as torch tensors (framework "pt") or
    numpy arrays ("np")."""
    hdr, _, data = read_header(path)
    out, spans = {}, []
    for name, t in hdr.items():
        if not isinstance(t, dict) or t.get("dtype") not in _DTYPES:
            raise ValueError(f"{path}: tensor '{name}': dtype {t.get('dtype') if isinstance(t, dict) else t!r} "
                             f"is not one of {sorted(_DTYPES)}")
        shape, (b, e) = [int(d) for d in t["shape"]], t["data_offsets"]
        dt = np.dtype(_DTYPES[t["dtype"]])
        if not (0 <= b <= e <= len(data)) or e - b != dt.itemsize * int(np.prod(shape)):
            raise ValueError(f"{path}: tensor '{name}': data_offsets [{b}, {e}) do not hold "
                             f"{shape} of {t['dtype']} within {len(data)} data bytes")
        spans.append((b, e, name))
        out[name] = np.frombuffer(data, dtype=dt, count=int(np.prod(shape)), offset=b).reshape(shape)
    spans.sort()
    for (b0, e0, n0), (b1, _, n1) in zip(spans, spans[1:]):
        if b1 < e0:
            raise ValueError(f"{path}: tensors '{n0}' and '{n1}' overlap")
    if framework == "np":
        return {k: v.copy() for k, v in out.items()}
    import torch
    return {k: torch.from_numpy(v.copy()) for k, v in out.items()}


def save_file(tensors, path, metadata=None):
    """Writes {name: tensor or array} in name order, the header padded with
    spaces to a multiple of 8 bytes (as the reference writer does)."""
    hdr, chunks, off = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name]
        a = t.detach().cpu().numpy() if hasattr(t, "detach") else np.asarray(t)
        a = np.ascontiguousarray(a)
        key = a.dtype.newbyteorder("<").str if a.dtype.byteorder == ">" else np.dtype(a.dtype).str
        if key not in _NAMES:
            raise ValueError(f"tensor '{name}': dtype {a.dtype} has no safetensors name")
        b = a.astype(np.dtype(key).newbyteorder("<"), copy=False).tobytes()
        hdr[name] = {"dtype": _NAMES[key], "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        chunks.append(b)
        off += len(b)
    if metadata:
        hdr["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    j = json.dumps(hdr, separators=(",", ":")).encode("utf-8")
    j += b" " * (-len(j) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(j)))
        f.write(j)
        for b in chunks:
            f.write(b)
