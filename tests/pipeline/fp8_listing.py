#!/usr/bin/env python3
"""fp8_listing.py FP8_FILE SOURCE_FILE — an independent reader of the fp8
safetensors files `flux quantize --type fp8|fp8_e5m2` writes (standard
library only: json + struct), used by tests/pipeline/test_fp8_quantize.c.

Checks, from the safetensors format (8-byte little-endian header length,
JSON header, data) and ComfyUI's mixed-quant convention (comfy/quant_ops.py
QUANT_ALGOS, comfy/utils.py convert_old_quants):
  - every entry has a known dtype, a shape, and data_offsets whose length is
    numel x element size; the entries tile the data exactly (no hole, no
    overlap) and the data ends at the end of the file;
  - __metadata__._quantization_metadata is JSON {"layers": {layer:
    {"format": "float8_e4m3fn" | "float8_e5m2"}}} naming exactly the fp8
    weights '<layer>.weight', each with an F32 '<layer>.weight_scale' of
    shape [] (or [1]);
  - each scale equals max|W| / fp8 max (448 or 57344) rounded to f32, W the
    same-named tensor of SOURCE_FILE (BF16 or F32), 1 for an all-zero W;
  - no fp8 code is NaN or infinity, and the largest |code| is the top one
    (max|W| / scale = fp8 max).
Prints one summary line; exit 1 with the reason on the first failure.
"""
import json
import struct
import sys

SIZES = {"F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "U8": 1, "I8": 1}
FORMATS = {"F8_E4M3": ("float8_e4m3fn", 448.0, 0x7E), "F8_E5M2": ("float8_e5m2", 57344.0, 0x7B)}


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def read(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    return header, blob[8 + n:], n


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def values(entry, data):
    a, b = entry["data_offsets"]
    raw = data[a:b]
    if entry["dtype"] == "BF16":
        return [struct.unpack("<f", struct.pack("<I", h << 16))[0] for h in struct.unpack("<%dH" % (len(raw) // 2), raw)]
    if entry["dtype"] == "F32":
        return list(struct.unpack("<%df" % (len(raw) // 4), raw))
    fail("source dtype %s not handled" % entry["dtype"])


def main():
    path, source = sys.argv[1], sys.argv[2]
    header, data, hlen = read(path)
    if hlen % 8:
        fail("header length %d is not a multiple of 8" % hlen)
    meta = header.pop("__metadata__", None)
    spans = []
    for name, e in header.items():
        if e["dtype"] not in SIZES:
            fail("%s: dtype %s" % (name, e["dtype"]))
        numel = 1
        for d in e["shape"]:
            numel *= d
        a, b = e["data_offsets"]
        if b - a != numel * SIZES[e["dtype"]]:
            fail("%s: offsets [%d, %d) for %s %s" % (name, a, b, e["dtype"], e["shape"]))
        spans.append((a, b, name))
    spans.sort()
    at = 0
    for a, b, name in spans:
        if a != at:
            fail("%s starts at %d, the previous tensor ends at %d" % (name, a, at))
        at = b
    if at != len(data):
        fail("tensors end at %d, the data is %d bytes" % (at, len(data)))

    fp8 = {n[:-len(".weight")]: e for n, e in header.items() if e["dtype"] in FORMATS}
    if not fp8:
        fail("no fp8 weight")
    if not meta or "_quantization_metadata" not in meta:
        fail("no __metadata__._quantization_metadata")
    layers = json.loads(meta["_quantization_metadata"])["layers"]
    if set(layers) != set(fp8):
        fail("_quantization_metadata names %d layers, the file has %d fp8 weights" % (len(layers), len(fp8)))

    src_header, src_data, _ = read(source)
    for layer, e in sorted(fp8.items()):
        fmt, fmax, top = FORMATS[e["dtype"]]
        if layers[layer].get("format") != fmt:
            fail("%s: format %r, want %s" % (layer, layers[layer].get("format"), fmt))
        s = header.get(layer + ".weight_scale")
        if not s or s["dtype"] != "F32" or s["shape"] not in ([], [1]):
            fail("%s.weight_scale missing or not an F32 scalar" % layer)
        (scale,) = struct.unpack("<f", data[s["data_offsets"][0]:s["data_offsets"][1]])
        w = values(src_header[layer + ".weight"], src_data)
        amax = max(abs(v) for v in w)
        want = f32(amax / fmax) if amax > 0 else 1.0  # f32 / f32 through a double: the f32 quotient
        if scale != want:
            fail("%s: scale %r, max|W| / %g = %r" % (layer, scale, fmax, want))
        a, b = e["data_offsets"]
        mags = [c & 0x7F for c in data[a:b]]
        if max(mags) > top:
            fail("%s: a NaN or infinity code" % layer)
        if amax > 0 and max(mags) != top:
            fail("%s: the largest code is %#x, want %#x" % (layer, max(mags), top))
    print("%d tensors, %d fp8 weights with their scales, data %d bytes: ok" % (len(header), len(fp8), len(data)))


main()
