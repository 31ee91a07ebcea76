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


def write_raw(path, tensors, metadata=None):
    """Write name -> (shape, raw bytes, dtype string) as a .safetensors file
    (in the given order, data back to back)."""
    header, offset = {}, 0
    if metadata:
        header["__metadata__"] = metadata
    for name, (shape, raw, dtype) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for shape, raw, dtype in tensors.values():
            f.write(raw)
