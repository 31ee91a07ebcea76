#!/usr/bin/python3
"""gen_vae_files.py — single-file VAEs in BFL / LDM names for the tiny golden
model, and a NumPy reference decode of a narrower decoder, written here
independently of flux.c (tests/model/test_vae_file.c).

    /usr/bin/python3 tools/gen_vae_files.py [OUT_DIR]
        (default tests/golden/vae_files; needs numpy, nothing else)

Writes
  flux2-vae-bfl.safetensors      tests/golden/model/vae's tensors (bytes untouched)
                                 under the names of black-forest-labs/flux2
                                 src/flux2/autoencoder.py (the layout of ComfyUI's
                                 vae/flux2-vae.safetensors), attention 1x1 convs
                                 [C, C, 1, 1], with the "first_stage_model." prefix
                                 of LDM checkpoints on every tensor
  small-decoder.safetensors      the golden encoder and BatchNorm statistics with
                                 a random decoder narrower than the encoder
                                 (widths DEC per level, full-resolution level first,
                                 as BFL's full_encoder_small_decoder.safetensors),
                                 BFL names, f32
  small-decoder-z.npy            a latent [32, 4, 4] (after BN and unpatchify)
  small-decoder-image.npy        its decode [3, 32, 32] by the NumPy decoder below
                                 (float64, BFL autoencoder.py's Decoder.forward)

BFL → diffusers: encoder.down.I.block.J = encoder.down_blocks.I.resnets.J;
decoder.up.I = decoder.up_blocks.(L-1-I) (LDM numbers decoder levels from the
image end); nin_shortcut = conv_shortcut; mid.block_1/2 = mid_block.resnets.0/1;
mid.attn_1.{norm,q,k,v,proj_out} = mid_block.attentions.0.{group_norm,to_q,to_k,
to_v,to_out.0}; norm_out = conv_norm_out; encoder.quant_conv = quant_conv;
decoder.post_quant_conv = post_quant_conv.
"""
import os
import re
import sys

import numpy as np

from safetensors_raw import read_raw, write_raw

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN_VAE = os.path.join(HERE, "..", "tests", "golden", "model", "vae", "diffusion_pytorch_model.safetensors")
LEVELS = 4
DEC = [32, 32, 32, 64]  # decoder widths, full-resolution level first (golden encoder: 32, 32, 64, 64)
GROUPS, EPS = 32, 1e-6


def bfl_name(name):
    """diffusers name → BFL name (the inverse of flux.c's table, written from autoencoder.py)."""
    name = re.sub(r"^quant_conv\.", "encoder.quant_conv.", name)
    name = re.sub(r"^post_quant_conv\.", "decoder.post_quant_conv.", name)
    name = re.sub(r"\.conv_norm_out\.", ".norm_out.", name)
    name = re.sub(r"\.conv_shortcut\.", ".nin_shortcut.", name)
    name = re.sub(r"^encoder\.down_blocks\.(\d+)\.resnets\.", r"encoder.down.\1.block.", name)
    name = re.sub(r"^encoder\.down_blocks\.(\d+)\.downsamplers\.0\.", r"encoder.down.\1.downsample.", name)
    name = re.sub(r"^decoder\.up_blocks\.(\d+)\.resnets\.",
                  lambda m: "decoder.up.%d.block." % (LEVELS - 1 - int(m.group(1))), name)
    name = re.sub(r"^decoder\.up_blocks\.(\d+)\.upsamplers\.0\.",
                  lambda m: "decoder.up.%d.upsample." % (LEVELS - 1 - int(m.group(1))), name)
    name = re.sub(r"\.mid_block\.resnets\.0\.", ".mid.block_1.", name)
    name = re.sub(r"\.mid_block\.resnets\.1\.", ".mid.block_2.", name)
    for d, b in (("group_norm", "norm"), ("to_q", "q"), ("to_k", "k"), ("to_v", "v"), ("to_out.0", "proj_out")):
        name = name.replace(".mid_block.attentions.0.%s." % d, ".mid.attn_1.%s." % b)
    return name


def is_attn_matrix(bfl):
    return re.search(r"\.mid\.attn_1\.(q|k|v|proj_out)\.weight$", bfl) is not None


def f32(shape, a):
    return (tuple(shape), np.ascontiguousarray(a, dtype="<f4").tobytes(), "F32")


# ---- the NumPy decoder (BFL autoencoder.py Decoder.forward, float64) ----

def group_norm(x, w, b):
    c, h, wd = x.shape
    g = x.reshape(GROUPS, -1)
    mean = g.mean(axis=1, keepdims=True)
    var = g.var(axis=1, keepdims=True)
    g = (g - mean) / np.sqrt(var + EPS)
    return g.reshape(c, h, wd) * w[:, None, None] + b[:, None, None]


def silu(x):
    return x / (1 + np.exp(-x))


def conv(x, w, b):
    """stride 1, padding k // 2"""
    co, ci, kh, kw = w.shape
    _, h, wd = x.shape
    p = kh // 2
    xp = np.pad(x, ((0, 0), (p, p), (p, p)))
    out = np.zeros((co, h, wd))
    for i in range(kh):
        for j in range(kw):
            out += np.einsum("oc,chw->ohw", w[:, :, i, j], xp[:, i:i + h, j:j + wd])
    return out + b[:, None, None]


def resnet(x, p, W):
    h = conv(silu(group_norm(x, W[p + "norm1.weight"], W[p + "norm1.bias"])), W[p + "conv1.weight"], W[p + "conv1.bias"])
    h = conv(silu(group_norm(h, W[p + "norm2.weight"], W[p + "norm2.bias"])), W[p + "conv2.weight"], W[p + "conv2.bias"])
    if p + "nin_shortcut.weight" in W:
        x = conv(x, W[p + "nin_shortcut.weight"], W[p + "nin_shortcut.bias"])
    return x + h


def attention(x, p, W):
    c, h, wd = x.shape
    n = group_norm(x, W[p + "norm.weight"], W[p + "norm.bias"])
    q, k, v = (conv(n, W[p + s + ".weight"], W[p + s + ".bias"]).reshape(c, -1) for s in "qkv")
    s = q.T @ k / np.sqrt(c)
    s = np.exp(s - s.max(axis=1, keepdims=True))
    s /= s.sum(axis=1, keepdims=True)
    o = (v @ s.T).reshape(c, h, wd)
    return x + conv(o, W[p + "proj_out.weight"], W[p + "proj_out.bias"])


def decode(z, W):
    h = conv(z, W["decoder.post_quant_conv.weight"], W["decoder.post_quant_conv.bias"])
    h = conv(h, W["decoder.conv_in.weight"], W["decoder.conv_in.bias"])
    h = resnet(h, "decoder.mid.block_1.", W)
    h = attention(h, "decoder.mid.attn_1.", W)
    h = resnet(h, "decoder.mid.block_2.", W)
    for lv in reversed(range(LEVELS)):
        j = 0
        while "decoder.up.%d.block.%d.conv1.weight" % (lv, j) in W:
            h = resnet(h, "decoder.up.%d.block.%d." % (lv, j), W)
            j += 1
        if lv:
            h = h.repeat(2, axis=1).repeat(2, axis=2)
            h = conv(h, W["decoder.up.%d.upsample.conv.weight" % lv], W["decoder.up.%d.upsample.conv.bias" % lv])
    h = silu(group_norm(h, W["decoder.norm_out.weight"], W["decoder.norm_out.bias"]))
    return conv(h, W["decoder.conv_out.weight"], W["decoder.conv_out.bias"])


def small_decoder(rng, lat, res_per_level):
    """Random decoder weights, BFL names; widths DEC (level 0 = full resolution)."""
    T = {}

    def conv_w(name, co, ci, k, scale=1.0):
        T[name + ".weight"] = rng.standard_normal((co, ci, k, k)) * scale / np.sqrt(ci * k * k)
        T[name + ".bias"] = rng.standard_normal(co) * 0.05

    def norm(name, c):
        T[name + ".weight"] = 1 + 0.1 * rng.standard_normal(c)
        T[name + ".bias"] = 0.1 * rng.standard_normal(c)

    def res(name, ci, co):
        norm(name + ".norm1", ci)
        conv_w(name + ".conv1", co, ci, 3)
        norm(name + ".norm2", co)
        conv_w(name + ".conv2", co, co, 3, 0.5)
        if ci != co:
            conv_w(name + ".nin_shortcut", co, ci, 1)

    top = DEC[LEVELS - 1]
    conv_w("decoder.post_quant_conv", lat, lat, 1)
    conv_w("decoder.conv_in", top, lat, 3)
    res("decoder.mid.block_1", top, top)
    norm("decoder.mid.attn_1.norm", top)
    for s in ("q", "k", "v", "proj_out"):
        conv_w("decoder.mid.attn_1." + s, top, top, 1)
    res("decoder.mid.block_2", top, top)
    cin = top
    for lv in reversed(range(LEVELS)):
        for j in range(res_per_level):
            res("decoder.up.%d.block.%d" % (lv, j), cin, DEC[lv])
            cin = DEC[lv]
        if lv:
            conv_w("decoder.up.%d.upsample.conv" % lv, cin, cin, 3)
    norm("decoder.norm_out", cin)
    conv_w("decoder.conv_out", 3, cin, 3)
    return T


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "tests", "golden", "vae_files")
    os.makedirs(out, exist_ok=True)
    golden = read_raw(GOLDEN_VAE)

    renamed = {}
    for name, (shape, raw, dtype) in golden.items():
        b = bfl_name(name)
        if is_attn_matrix(b):
            shape = tuple(shape) + (1, 1)
        renamed["first_stage_model." + b] = (shape, raw, dtype)
    write_raw(os.path.join(out, "flux2-vae-bfl.safetensors"), renamed)

    rng = np.random.default_rng(30)
    lat = golden["decoder.conv_in.weight"][0][1]
    res_per_level = sum(1 for n in golden if re.match(r"decoder\.up_blocks\.0\.resnets\.\d+\.conv1\.weight$", n))
    dec = small_decoder(rng, lat, res_per_level)
    small = {}
    for name, t in golden.items():
        b = bfl_name(name)
        if b.startswith("decoder."):
            continue
        small[b] = ((tuple(t[0]) + (1, 1)) if is_attn_matrix(b) else t[0], t[1], t[2])
    for name, a in dec.items():
        small[name] = f32(a.shape, a.astype(np.float32))
    write_raw(os.path.join(out, "small-decoder.safetensors"), small)

    W = {n: a.astype(np.float32).astype(np.float64) for n, a in dec.items()}
    z = rng.standard_normal((lat, 4, 4)).astype(np.float32)
    np.save(os.path.join(out, "small-decoder-z.npy"), z)
    np.save(os.path.join(out, "small-decoder-image.npy"), decode(z.astype(np.float64), W).astype(np.float32))


if __name__ == "__main__":
    main()
