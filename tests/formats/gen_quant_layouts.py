#!/usr/bin/env python3
"""gen_quant_layouts.py — the golden tiny model in the quantized safetensors
layouts other tools write (README "fp8 checkpoints"), each with its decoded
twin (the same weights dequantized to F32, scale tensors dropped), written
by NumPy alone: an independent writer of the layouts flux.c reads.

    python3 gen_quant_layouts.py MODEL_DIR OUT_DIR
    python3 gen_quant_layouts.py --seeds DIR     (the fuzz seeds, written once)

writes OUT_DIR/<component>-<layout>.safetensors and -twin.safetensors for
  transformer   rowwise   F8_E4M3, '.weight_scale' F32 [n, 1] (one per output row);
                          a stray '.weight_scale' beside a BF16 norm weight
                block128  F8_E4M3, '.weight_scale_inv' F32 [ceil(n/128), ceil(k/128)]
                          (transformers' fine-grained fp8, DeepSeek-V3 / Qwen3-*-FP8)
                block64   F8_E4M3, '.weight_scale' F32 [n/64, k/64] (convert_to_quant's
                          float8_e4m3fn_blockwise, BlockWiseFP8Layout); k = 48 stays BF16
                mxfp8     F8_E4M3, '.weight_scale' F8_E8M0 [roundup(n,128), roundup(k/32,4)]
                          in cuBLAS tiles (comfy-kitchen quantize_mxfp8 / to_blocked);
                          weights whose k is not a multiple of 32 stay BF16
                int8      I8, '.weight_scale' F32 [n, 1] per output channel (comfy-kitchen
                          TensorWiseINT8Layout / ComfyUI int8_tensorwise, per_channel)
  text_encoder  rowwise   F8_E5M2, '.weight_scale' BF16 [n]; embed_tokens fp8 too
                block128  F8_E4M3, '.weight_scale_inv' F32; embed_tokens BF16
                int8      I8, '.weight_scale' F32 [] (one per tensor); embed_tokens int8 too
  both          nvfp4     U8 [n, k/2] E2M1 pairs (even element in the high nibble),
                          '.weight_scale' F8_E4M3 [roundup(n,128), roundup(k/16,4)] in cuBLAS
                          tiles, '.weight_scale_2' F32 [] (comfy-kitchen quantize_nvfp4);
                          the text encoder's embed_tokens too
and the refused files of other formats (gptq, bnb-nf4, svdquant).
The fp8 codes come from NumPy's own rounding (nearest code, ties to the
even code); the twin is f32(code) * scale in float32, one rounding, which
is each layout's convention.
"""
import json
import math
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from safetensors_raw import read_raw  # noqa: E402


def fp8_table(kind):
    """Values of the 256 codes (NaN where the code is NaN / infinity)."""
    v = np.empty(256, dtype=np.float64)
    for c in range(256):
        s = -1.0 if c & 0x80 else 1.0
        if kind == "e4m3":
            e, m = (c >> 3) & 15, c & 7
            if e == 15 and m == 7:
                v[c] = np.nan
            elif e == 0:
                v[c] = s * m / 8 * 2.0 ** -6
            else:
                v[c] = s * (1 + m / 8) * 2.0 ** (e - 7)
        else:
            e, m = (c >> 2) & 31, c & 3
            if e == 31:
                v[c] = np.nan
            elif e == 0:
                v[c] = s * m / 4 * 2.0 ** -14
            else:
                v[c] = s * (1 + m / 4) * 2.0 ** (e - 15)
    return v


TABLES = {k: fp8_table(k) for k in ("e4m3", "e5m2")}
FP8_MAX = {"e4m3": 448.0, "e5m2": 57344.0}


def encode(x, kind):
    """float array -> codes (uint8): nearest finite code, ties to the even
    code, saturated to +-max."""
    t = TABLES[kind]
    pos = np.array([c for c in range(128) if np.isfinite(t[c])], dtype=np.int64)
    mags = t[pos]
    order = np.argsort(mags, kind="stable")
    pos, mags = pos[order], mags[order]
    a = np.minimum(np.abs(x.astype(np.float64)), FP8_MAX[kind])
    hi = np.clip(np.searchsorted(mags, a), 1, len(mags) - 1)
    lo = hi - 1
    dlo, dhi = a - mags[lo], mags[hi] - a
    pick = np.where(dhi < dlo, hi, np.where(dlo < dhi, lo, np.where(pos[lo] % 2 == 0, lo, hi)))
    code = pos[pick].astype(np.uint8)
    return np.where(x < 0, code | 0x80, code).astype(np.uint8)


def decode(codes, kind):
    return TABLES[kind][codes].astype(np.float32)


def bf16_to_f32(raw, shape):
    u = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
    return u.view(np.float32).reshape(shape)


def to_bf16_raw(x):
    """float32 -> bf16 bits, round to nearest even (values here are finite)."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype("<u2")


def write_safetensors(path, tensors, metadata=None):
    """tensors: list of (name, dtype string, shape, bytes); written F32
    first, then 2-byte, then 1-byte types (every tensor aligned)."""
    size = {"F32": 4, "I32": 4, "BF16": 2, "F16": 2}
    tensors = sorted(tensors, key=lambda t: -size.get(t[1], 1))
    header, off = {}, 0
    if metadata:
        header["__metadata__"] = metadata
    for name, dt, shape, data in tensors:
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(data)]}
        off += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for t in tensors:
            f.write(t[3])


def f32(x):
    return np.ascontiguousarray(x, dtype="<f4").tobytes()


def tiled(s):
    """comfy-kitchen float_utils.to_blocked: [rows, cols] -> cuBLAS tiles of
    128 rows x 4 columns, [roundup(rows,128), roundup(cols,4)]."""
    r, c = s.shape
    R, C = -(-r // 128) * 128, -(-c // 4) * 4
    p = np.zeros((R, C), dtype=s.dtype)
    p[:r, :c] = s
    b = p.reshape(R // 128, 128, C // 4, 4).transpose(0, 2, 1, 3)
    return b.reshape(-1, 4, 32, 4).transpose(0, 2, 1, 3).reshape(R, C)


def quantize(w, layout, kind, scale_dtype):
    """(fp8 codes, scale tensors {suffix: (dtype, shape, bytes)}, twin f32)."""
    n, k = w.shape
    fmax = FP8_MAX.get(kind)
    if layout == "rowwise":
        s = np.abs(w).max(axis=1) / np.float32(fmax)
        s = np.where(s == 0, np.float32(1), s).astype(np.float32)
        if scale_dtype == "BF16":
            s = bf16_to_f32(to_bf16_raw(s).tobytes(), (n,))
            raw, shape = to_bf16_raw(s).tobytes(), (n,)
        else:
            raw, shape = f32(s), (n, 1)
        codes = encode(w / s[:, None], kind)
        twin = decode(codes, kind) * s[:, None]
        return codes, {".weight_scale": (scale_dtype, shape, raw)}, twin
    if layout in ("block128", "block64"):
        b = 128 if layout == "block128" else 64
        gb = (-(-n // b), -(-k // b))
        s = np.ones(gb, dtype=np.float32)
        for i in range(gb[0]):
            for j in range(gb[1]):
                a = np.abs(w[i * b:(i + 1) * b, j * b:(j + 1) * b]).max()
                s[i, j] = a / np.float32(fmax) if a > 0 else 1
        if scale_dtype == "BF16":
            s = bf16_to_f32(to_bf16_raw(s).tobytes(), gb)
            raw = to_bf16_raw(s).tobytes()
        else:
            raw = f32(s)
        full = np.repeat(np.repeat(s, b, axis=0), b, axis=1)[:n, :k]
        codes = encode(w / full, kind)
        twin = decode(codes, kind) * full
        return codes, {".weight_scale_inv" if b == 128 else ".weight_scale": (scale_dtype, gb, raw)}, twin
    if layout == "mxfp8":  # comfy-kitchen backends/eager/quantization.py quantize_mxfp8
        blocks = w.reshape(n, k // 32, 32)
        amax = np.abs(blocks).max(axis=2)
        need = np.maximum(amax / np.float32(fmax), np.float32(2.0 ** -127))
        e = np.clip(np.ceil(np.log2(need.astype(np.float64))).astype(np.int64) + 127, 0, 254)
        e = np.where(amax == 0, 0, e)
        sc = np.where(e == 0, np.float32(0), np.ldexp(np.float32(1), (e - 127).astype(np.int32))).astype(np.float32)
        div = np.where(sc == 0, np.float32(1), sc)
        codes = encode((blocks / div[:, :, None]).reshape(n, k), kind)
        twin = (decode(codes, kind).reshape(n, k // 32, 32) * sc[:, :, None]).reshape(n, k)
        t = tiled(e.astype(np.uint8))
        return codes, {".weight_scale": ("F8_E8M0", t.shape, t.tobytes())}, twin
    if layout in ("int8", "int8-tensor"):  # comfy-kitchen TensorWiseINT8Layout: '' I8, '_scale'
        a = np.abs(w).max(axis=1, keepdims=True) if layout == "int8" else np.abs(w).max(keepdims=True)
        s = np.where(a == 0, np.float32(1), a / np.float32(127)).astype(np.float32)
        codes = np.clip(np.rint(w / s), -127, 127).astype(np.int8)
        twin = codes.astype(np.float32) * s
        shape = (n, 1) if layout == "int8" else ()
        return codes.view(np.uint8), {".weight_scale": ("F32", shape, f32(s))}, twin
    if layout == "nvfp4":  # comfy-kitchen backends/eager/quantization.py quantize_nvfp4 (hi_first)
        s2 = np.float32(np.abs(w).max() / np.float32(448.0 * 6.0))
        blocks = w.reshape(n, k // 16, 16)
        bscale = np.minimum(np.abs(blocks).max(axis=2) / np.float32(6.0) / s2, np.float32(448.0))
        bcode = encode(bscale, "e4m3")
        total = (decode(bcode, "e4m3") * s2).astype(np.float32)
        safe = np.where(total == 0, np.float32(1), total)
        scaled = np.clip(np.where(total[:, :, None] == 0, 0, blocks / safe[:, :, None]), -6, 6).reshape(n, k)
        codes = encode_e2m1(scaled)
        packed = (codes[:, 0::2] << 4 | codes[:, 1::2]).astype(np.uint8)
        twin = (E2M1[codes].reshape(n, k // 16, 16) * total[:, :, None]).reshape(n, k).astype(np.float32)
        t = tiled(bcode)
        return packed, {".weight_scale": ("F8_E4M3", t.shape, t.tobytes()),
                        ".weight_scale_2": ("F32", (), f32(s2))}, twin
    raise ValueError(layout)


E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype=np.float32)


def encode_e2m1(x):
    """float array in [-6, 6] -> E2M1 codes (nearest, ties to the even code)."""
    mags = E2M1[:8].astype(np.float64)
    a = np.abs(x.astype(np.float64))
    hi = np.clip(np.searchsorted(mags, a), 1, 7)
    lo = hi - 1
    dlo, dhi = a - mags[lo], mags[hi] - a
    code = np.where(dhi < dlo, hi, np.where(dlo < dhi, lo, np.where(lo % 2 == 0, lo, hi))).astype(np.uint8)
    return np.where(x < 0, code | 8, code).astype(np.uint8)


def load(model, component):
    d = os.path.join(model, component)
    out = {}
    for f in sorted(os.listdir(d)):
        if f.endswith(".safetensors"):
            out.update(read_raw(os.path.join(d, f)))
    return out


def write_layout(src, out, layout, kind, scale_dtype, quant_embed, stray):
    q, twin = [], []
    dt_name = {"e4m3": "F8_E4M3", "e5m2": "F8_E5M2", "i8": "I8", "e2m1": "U8"}[kind]
    for name, (shape, raw, dt) in src.items():
        assert dt == "BF16", (name, dt)
        w = bf16_to_f32(raw, shape)
        take = len(shape) == 2 and name.endswith(".weight") and (layout != "mxfp8" or shape[1] % 32 == 0) and \
            (layout != "block64" or (shape[0] % 64 == 0 and shape[1] % 64 == 0))
        if name == "model.embed_tokens.weight" and not quant_embed:
            take = False
        if not take:
            q.append((name, "BF16", shape, raw))
            twin.append((name, "F32", shape, f32(w)))
            if stray and len(shape) == 1 and name.endswith("norm_q.weight"):
                q.append((name[:-7] + ".weight_scale", "F32", (), f32(np.float32(0.5))))  # ignored
            continue
        codes, scales, tw = quantize(w, layout, kind, scale_dtype)
        q.append((name, dt_name, codes.shape, codes.tobytes()))
        for suffix, (sdt, sshape, sraw) in scales.items():
            q.append((name[:-7] + suffix, sdt, sshape, sraw))
        twin.append((name, "F32", shape, f32(tw)))
    write_safetensors(out + ".safetensors", q, {"format": "pt"})
    write_safetensors(out + "-twin.safetensors", twin, {"format": "pt"})


def write_refused(src, out_dir):
    """One file of each format flux.c does not read: the transformer with
    one linear layer in the format's tensor names (values are placeholders:
    the names and dtypes are what is refused)."""
    name = "transformer_blocks.0.attn.to_q.weight"
    shape, raw, _ = src[name]
    n, k = shape
    stem = name[:-7]
    rest = [(m, d, s, r) for m, (s, r, d) in src.items() if m != name]
    u8 = lambda c: bytes(c)  # noqa: E731
    formats = {
        # AutoGPTQ QuantLinear buffers
        "gptq": [(stem + ".qweight", "I32", (k // 8, n), u8(k // 8 * n * 4)),
                 (stem + ".qzeros", "I32", (1, n // 8), u8(n // 8 * 4)),
                 (stem + ".scales", "F16", (1, n), u8(2 * n)),
                 (stem + ".g_idx", "I32", (k,), u8(4 * k))],
        # bitsandbytes Linear4bit state dict
        "bnb-nf4": [(name, "U8", (n * k // 2, 1), u8(n * k // 2)),
                    (name + ".absmax", "F32", (n * k // 64,), u8(n * k // 16)),
                    (name + ".quant_map", "F32", (16,), u8(64)),
                    (name + ".quant_state.bitsandbytes__nf4", "U8", (8,), u8(8))],
        # nunchaku SVDQW4A4Linear
        "svdquant": [(stem + ".qweight", "I8", (n, k // 2), u8(n * k // 2)),
                     (stem + ".wscales", "BF16", (k // 64, n), u8(2 * n * (k // 64))),
                     (stem + ".smooth_factor", "BF16", (k,), u8(2 * k)),
                     (stem + ".proj_down", "BF16", (k, 16), u8(32 * k)),
                     (stem + ".proj_up", "BF16", (n, 16), u8(32 * n))],
    }
    # broken scales of layouts flux.c reads: refused at load too
    w = bf16_to_f32(raw, shape)
    codes, _, _ = quantize(w, "rowwise", "e4m3", "F32")
    s = np.full((n, 1), 0.01, dtype=np.float32)
    s[5, 0] = np.nan
    formats["rowwise-nan"] = [(name, "F8_E4M3", shape, codes.tobytes()), (stem + ".weight_scale", "F32", (n, 1), f32(s))]
    formats["rowwise-shape"] = [(name, "F8_E4M3", shape, codes.tobytes()),
                                (stem + ".weight_scale", "F32", (n + 1,), f32(np.ones(n + 1)))]
    mcodes, mscales, _ = quantize(w, "mxfp8", "e4m3", None)
    _, mshape, mraw = mscales[".weight_scale"]
    mraw = bytes([255]) + mraw[1:]
    formats["mxfp8-e255"] = [(name, "F8_E4M3", shape, mcodes.tobytes()), (stem + ".weight_scale", "F8_E8M0", mshape, mraw)]
    for fmt, tensors in formats.items():
        write_safetensors(os.path.join(out_dir, "transformer-%s.safetensors" % fmt), rest + tensors)


def write_seeds(out_dir):
    """Small fuzz seeds (tests/fuzz/corpus/single_file, .../safetensors):
    one diffusers-named linear [4, 64] in each layout."""
    rng = np.random.default_rng(7)
    w = (rng.standard_normal((4, 64)) * 0.05).astype(np.float32)
    name = "transformer_blocks.0.attn.to_q.weight"
    for layout, kind, sdt in (("rowwise", "e4m3", "F32"), ("block128", "e5m2", "BF16"), ("mxfp8", "e4m3", None),
                              ("int8", "i8", "F32"), ("nvfp4", "e2m1", None)):
        codes, scales, _ = quantize(w, layout, kind, sdt)
        dt = {"e4m3": "F8_E4M3", "e5m2": "F8_E5M2", "i8": "I8", "e2m1": "U8"}[kind]
        t = [(name, dt, codes.shape, codes.tobytes())]
        t += [(name[:-7] + sfx, sd, ss, sr) for sfx, (sd, ss, sr) in scales.items()]
        write_safetensors(os.path.join(out_dir, "quant-%s.safetensors" % layout), t)


def main():
    if sys.argv[1] == "--seeds":
        write_seeds(sys.argv[2])
        return
    model, out_dir = sys.argv[1], sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    dit, te = load(model, "transformer"), load(model, "text_encoder")
    p = lambda c, l: os.path.join(out_dir, "%s-%s" % (c, l))  # noqa: E731
    write_layout(dit, p("transformer", "rowwise"), "rowwise", "e4m3", "F32", False, True)
    write_layout(dit, p("transformer", "block128"), "block128", "e4m3", "F32", False, False)
    write_layout(dit, p("transformer", "block64"), "block64", "e4m3", "F32", False, False)
    write_layout(dit, p("transformer", "mxfp8"), "mxfp8", "e4m3", None, False, False)
    write_layout(dit, p("transformer", "int8"), "int8", "i8", "F32", False, False)
    write_layout(te, p("text_encoder", "int8"), "int8-tensor", "i8", "F32", True, False)
    write_layout(dit, p("transformer", "nvfp4"), "nvfp4", "e2m1", None, False, False)
    write_layout(te, p("text_encoder", "nvfp4"), "nvfp4", "e2m1", None, True, False)
    write_layout(te, p("text_encoder", "rowwise"), "rowwise", "e5m2", "BF16", True, False)
    write_layout(te, p("text_encoder", "block128"), "block128", "e4m3", "F32", False, False)
    write_refused(dit, out_dir)
    print("wrote", len(os.listdir(out_dir)), "files to", out_dir)


if __name__ == "__main__":
    main()
