"""safetensors_raw.py — the tensors of a .safetensors file as raw bytes, for
the NumPy-only generator scripts in tools/ (no safetensors package needed)."""
import json
import struct


def read_raw(path):
    """name -> (shape tuple, raw bytes, dtype string), in header order."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        out[name] = (tuple(t["shape"]), data[a:b], t["dtype"])
    return out
