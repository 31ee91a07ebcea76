"""klein.py — an independent NumPy float64 reference of the FLUX.2-klein pipeline.

Written from the model as shipped (the public reference code: black-forest-labs/flux2
src/flux2/model.py, sampling.py, autoencoder.py; diffusers pipeline_flux2_klein.py;
transformers modeling_qwen3.py), one stage per function, not ported from any other
implementation; the bracketed section marks (§) are our design notes' numbering. Everything is float64; weights are read from the
safetensors files of a model folder in the official layout (bf16 = uint16 << 16,
f16, f32). It is slow and meant for tiny models, bisecting and golden data:
every stage is a plain function, and `capture` dicts collect the intermediate
tensors under the diffusers module names used by tests/golden.

Shapes: H×W pixels, h = H/16, w = W/16, N = h·w target tokens, L = 512.
"""
import json
import math
import os
import struct

import numpy as np

TEXT_LEN = 512
# The official code computes two things in float32 whose rounding shows at the
# 1e-5 level: the σ schedule (σ_0 comes out as 0.99999994 for some sizes) and the
# timestep-embedding angles t·f_i (t up to 1000, so one f32 ulp is 6e-5 rad; the
# f_i come from torch's float32 exp, which is not correctly rounded). By default
# this reference computes both exactly in float64. OFFICIAL_F32_TIME = True
# reproduces the official float32 values instead (the σ arithmetic is emulated
# with NumPy float32; the angles need torch's float32 exp, so torch must be
# importable) — used by check_golden.py --official-f32-time to show that every
# remaining difference to the official goldens is float32 rounding.
OFFICIAL_F32_TIME = False
HIDDEN_LAYERS = (9, 18, 27)  # HF hidden_states indices stacked into the embeddings [§6.2]


# --------------------------------------------------------------------------- files

def read_safetensors_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n)), 8 + n


_DTYPES = {"BF16": (np.uint16, 2), "F16": (np.float16, 2), "F32": (np.float32, 4),
           "F64": (np.float64, 8), "I64": (np.int64, 8)}


class SafeTensors:
    """All tensors of one or more .safetensors files, decoded lazily to float64."""

    def __init__(self, paths):
        self.index = {}
        for p in paths:
            hdr, base = read_safetensors_header(p)
            mm = np.memmap(p, dtype=np.uint8, mode="r")
            for name, v in hdr.items():
                if name == "__metadata__":
                    continue
                if name in self.index:
                    raise ValueError(f"{p}: tensor {name} also in another shard")
                self.index[name] = (mm, base, v)
        self.cache = {}

    def __contains__(self, name):
        return name in self.index

    def raw(self, name):
        mm, base, v = self.index[name]
        b, e = v["data_offsets"]
        np_dt, size = _DTYPES[v["dtype"]]
        a = np.frombuffer(mm[base + b: base + e], dtype=np_dt)
        if v["dtype"] == "BF16":
            a = (a.astype(np.uint32) << 16).view(np.float32)
        return a.reshape(v["shape"])

    def rows(self, name, idx):
        """Rows of a 2-D tensor (embedding lookup without decoding the whole table)."""
        return self.raw(name)[np.asarray(idx)].astype(np.float64)

    def __getitem__(self, name):
        """float64 copy; small tensors are cached, big ones are decoded on each use so a
        full-size model (4B params = 32 GB in float64) never sits in memory at once."""
        if name in self.cache:
            return self.cache[name]
        a = self.raw(name).astype(np.float64)
        if a.size <= (1 << 22):
            self.cache[name] = a
        return a


def load_json(path):
    with open(path) as f:
        return json.load(f)


class Model:
    """A klein model folder: configs + the three weight sets."""

    def __init__(self, folder):
        self.folder = folder
        self.index = load_json(os.path.join(folder, "model_index.json"))
        self.distilled = bool(self.index.get("is_distilled", False))
        self.tcfg = load_json(os.path.join(folder, "transformer/config.json"))
        self.qcfg = load_json(os.path.join(folder, "text_encoder/config.json"))
        self.vcfg = load_json(os.path.join(folder, "vae/config.json"))
        self.T = SafeTensors([os.path.join(folder, "transformer/diffusion_pytorch_model.safetensors")])
        te = os.path.join(folder, "text_encoder")
        idx = os.path.join(te, "model.safetensors.index.json")
        if os.path.exists(idx):
            shards = sorted(set(load_json(idx)["weight_map"].values()))
        else:
            shards = ["model.safetensors"]
        self.Q = SafeTensors([os.path.join(te, s) for s in shards])
        self.V = SafeTensors([os.path.join(folder, "vae/diffusion_pytorch_model.safetensors")])


# --------------------------------------------------------------------------- basics

def silu(x):
    return x / (1.0 + np.exp(-x))


def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def layer_norm(x, eps):
    """LayerNorm over the last dim, no affine, biased variance [§0]."""
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps)


def softmax(s, axis=-1):
    s = s - s.max(axis=axis, keepdims=True)
    e = np.exp(s)
    return e / e.sum(axis=axis, keepdims=True)


def linear(x, w, b=None):
    y = x @ w.T
    return y if b is None else y + b


# --------------------------------------------------------------------------- Qwen3 [§6.1, §6.2]

def qwen3_rope(x, pos, theta):
    """Half-split (rotate-half) RoPE over the last dim of x [seq, heads, hd]."""
    hd = x.shape[-1]
    inv = 1.0 / theta ** (np.arange(0, hd, 2, dtype=np.float64) / hd)
    ang = pos[:, None].astype(np.float64) * inv[None, :]            # [seq, hd/2]
    cos = np.cos(ang)[:, None, :]
    sin = np.sin(ang)[:, None, :]
    x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def qwen3_layer(m, n, x, mask):
    """One decoder layer. x [L, hidden]; mask [L, L] bool (True = may attend)."""
    c, W = m.qcfg, m.Q
    p = f"model.layers.{n}."
    H, KV, hd, eps = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"], c["rms_norm_eps"]
    L = x.shape[0]
    a = rms_norm(x, W[p + "input_layernorm.weight"], eps)
    q = linear(a, W[p + "self_attn.q_proj.weight"]).reshape(L, H, hd)
    k = linear(a, W[p + "self_attn.k_proj.weight"]).reshape(L, KV, hd)
    v = linear(a, W[p + "self_attn.v_proj.weight"]).reshape(L, KV, hd)
    q = rms_norm(q, W[p + "self_attn.q_norm.weight"], eps)
    k = rms_norm(k, W[p + "self_attn.k_norm.weight"], eps)
    pos = np.arange(L)
    q = qwen3_rope(q, pos, c["rope_theta"])
    k = qwen3_rope(k, pos, c["rope_theta"])
    rep = H // KV                                                   # GQA: q head h uses kv head h // rep
    k = np.repeat(k, rep, axis=1)
    v = np.repeat(v, rep, axis=1)
    s = np.einsum("qhd,khd->hqk", q, k) / math.sqrt(hd)
    s = np.where(mask[None], s, -np.inf)
    o = np.einsum("hqk,khd->qhd", softmax(s), v).reshape(L, H * hd)
    x = x + linear(o, W[p + "self_attn.o_proj.weight"])
    b = rms_norm(x, W[p + "post_attention_layernorm.weight"], eps)
    f = silu(linear(b, W[p + "mlp.gate_proj.weight"])) * linear(b, W[p + "mlp.up_proj.weight"])
    return x + linear(f, W[p + "mlp.down_proj.weight"])


def encode_text(m, tokens, attention_mask, capture=None, all_layers=False):
    """tokens, attention_mask int [512] → embeddings [512, 3·hidden] (hidden states 9, 18, 27).

    capture (dict) receives te_hidden_KK in HF numbering (00 = embedding output,
    KK = output of layer KK−1, last = final norm) when all_layers is set."""
    tokens = np.asarray(tokens).astype(np.int64)
    keep = np.asarray(attention_mask).astype(bool)
    L = tokens.shape[0]
    causal = np.tril(np.ones((L, L), dtype=bool))
    mask = causal & keep[None, :]
    n_layers = m.qcfg["num_hidden_layers"] if all_layers else max(HIDDEN_LAYERS)
    x = m.Q.rows("model.embed_tokens.weight", tokens)
    hs = [x]
    for n in range(n_layers):
        x = qwen3_layer(m, n, x, mask)
        hs.append(x)
    if capture is not None and all_layers:
        for k, h in enumerate(hs):
            capture[f"te_hidden_{k:02d}"] = h
        capture[f"te_hidden_{len(hs) - 1:02d}"] = rms_norm(
            hs[-1], m.Q["model.norm.weight"], m.qcfg["rms_norm_eps"])
    return np.concatenate([hs[i] for i in HIDDEN_LAYERS], axis=1)


# --------------------------------------------------------------------------- transformer [§3]

def timestep_embedding(sigma, channels=256):
    """t = 1000·σ; [cos(t·f), sin(t·f)] with f_i = exp(−ln(10000)·i/half) [§3.2]."""
    half = channels // 2
    if OFFICIAL_F32_TIME:
        import torch
        t = torch.tensor([float(np.float32(sigma))], dtype=torch.float32) * 1000.0
        f = torch.exp(-math.log(10000.0) * torch.arange(0, half, dtype=torch.float32) / half)
        a = (t[:, None] * f[None])[0].double().numpy()
    else:
        f = np.exp(-math.log(10000.0) * np.arange(half, dtype=np.float64) / half)
        a = 1000.0 * sigma * f
    return np.concatenate([np.cos(a), np.sin(a)])


def rope_tables(ids, axes, theta):
    """ids [S, 4] → cos, sin [S, head_dim/2] for the interleaved-pair 4-axis RoPE [§3.5]."""
    cos, sin = [], []
    for a, dim in enumerate(axes):
        j = np.arange(dim // 2, dtype=np.float64)
        w = theta ** (-2.0 * j / dim)
        ang = ids[:, a:a + 1].astype(np.float64) * w[None, :]
        cos.append(np.cos(ang))
        sin.append(np.sin(ang))
    return np.concatenate(cos, axis=1), np.concatenate(sin, axis=1)


def apply_rope_pairs(x, cos, sin):
    """x [S, heads, hd]: pairs (2j, 2j+1) rotated by the angle of pair j."""
    x0, x1 = x[..., 0::2], x[..., 1::2]
    c, s = cos[:, None, :], sin[:, None, :]
    out = np.empty_like(x)
    out[..., 0::2] = x0 * c - x1 * s
    out[..., 1::2] = x1 * c + x0 * s
    return out


def image_ids(h, w, t=0):
    y, x = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
    return np.stack([np.full(h * w, t), y.ravel(), x.ravel(), np.zeros(h * w)], axis=1)


def text_ids(n=TEXT_LEN):
    return np.stack([np.zeros(n), np.zeros(n), np.zeros(n), np.arange(n)], axis=1)


def adaln(x, shift, scale, eps):
    return layer_norm(x, eps) * (1.0 + scale) + shift


def attention(q, k, v):
    """q, k, v [S, heads, hd] → [S, heads·hd], full bidirectional softmax attention."""
    S, H, hd = q.shape
    s = np.einsum("qhd,khd->hqk", q, k) / math.sqrt(hd)
    return np.einsum("hqk,khd->qhd", softmax(s), v).reshape(S, H * hd)


def transformer(m, x_img, ids_img, emb, sigma, capture=None):
    """One transformer call [§3.10].

    x_img [N_img, 128] image tokens (target first, then references), ids_img [N_img, 4],
    emb [512, joint_dim] text embeddings, sigma scalar → velocity [N_img, 128]."""
    c, W = m.tcfg, m.T
    H, hd, eps = c["num_attention_heads"], c["attention_head_dim"], c["eps"]
    d = H * hd
    cap = capture if capture is not None else {}
    L = emb.shape[0]

    e = timestep_embedding(sigma, c.get("timestep_guidance_channels", 256))
    temb = linear(silu(linear(e, W["time_guidance_embed.timestep_embedder.linear_1.weight"])),
                  W["time_guidance_embed.timestep_embedder.linear_2.weight"])
    cap["time_guidance_embed"] = temb
    s = silu(temb)
    M_img = np.split(linear(s, W["double_stream_modulation_img.linear.weight"]), 6)
    M_txt = np.split(linear(s, W["double_stream_modulation_txt.linear.weight"]), 6)
    M_sgl = np.split(linear(s, W["single_stream_modulation.linear.weight"]), 3)
    scale_f, shift_f = np.split(linear(s, W["norm_out.linear.weight"]), 2)

    h_img = linear(x_img, W["x_embedder.weight"])
    h_txt = linear(emb, W["context_embedder.weight"])
    cap["x_embedder"], cap["context_embedder"] = h_img, h_txt

    ids = np.concatenate([text_ids(L), ids_img], axis=0)
    cos, sin = rope_tables(ids, c["axes_dims_rope"], c["rope_theta"])

    def qkv(a, wq, wk, wv, nq, nk):
        n = a.shape[0]
        q = rms_norm(linear(a, W[wq]).reshape(n, H, hd), W[nq], eps)
        k = rms_norm(linear(a, W[wk]).reshape(n, H, hd), W[nk], eps)
        v = linear(a, W[wv]).reshape(n, H, hd)
        return q, k, v

    for i in range(c["num_layers"]):
        p = f"transformer_blocks.{i}."
        a_img = adaln(h_img, M_img[0], M_img[1], eps)
        a_txt = adaln(h_txt, M_txt[0], M_txt[1], eps)
        qi, ki, vi = qkv(a_img, p + "attn.to_q.weight", p + "attn.to_k.weight", p + "attn.to_v.weight",
                         p + "attn.norm_q.weight", p + "attn.norm_k.weight")
        qt, kt, vt = qkv(a_txt, p + "attn.add_q_proj.weight", p + "attn.add_k_proj.weight",
                         p + "attn.add_v_proj.weight", p + "attn.norm_added_q.weight",
                         p + "attn.norm_added_k.weight")
        q = apply_rope_pairs(np.concatenate([qt, qi]), cos, sin)
        k = apply_rope_pairs(np.concatenate([kt, ki]), cos, sin)
        o = attention(q, k, np.concatenate([vt, vi]))
        h_img = h_img + M_img[2] * linear(o[L:], W[p + "attn.to_out.0.weight"])
        h_txt = h_txt + M_txt[2] * linear(o[:L], W[p + "attn.to_add_out.weight"])
        for hname, M, ff in (("img", M_img, "ff"), ("txt", M_txt, "ff_context")):
            hs = h_img if hname == "img" else h_txt
            b = adaln(hs, M[3], M[4], eps)
            u = linear(b, W[p + ff + ".linear_in.weight"])
            g, up = np.split(u, 2, axis=-1)
            hs = hs + M[5] * linear(silu(g) * up, W[p + ff + ".linear_out.weight"])
            if hname == "img":
                h_img = hs
            else:
                h_txt = hs
        cap[f"transformer_blocks.{i}.img"] = h_img
        cap[f"transformer_blocks.{i}.txt"] = h_txt

    h = np.concatenate([h_txt, h_img])
    m_hidden = int(d * c.get("mlp_ratio", 3.0))
    for j in range(c["num_single_layers"]):
        p = f"single_transformer_blocks.{j}.attn."
        a = adaln(h, M_sgl[0], M_sgl[1], eps)
        u = linear(a, W[p + "to_qkv_mlp_proj.weight"])
        S = h.shape[0]
        q = rms_norm(u[:, :d].reshape(S, H, hd), W[p + "norm_q.weight"], eps)
        k = rms_norm(u[:, d:2 * d].reshape(S, H, hd), W[p + "norm_k.weight"], eps)
        v = u[:, 2 * d:3 * d].reshape(S, H, hd)
        g, up = u[:, 3 * d:3 * d + m_hidden], u[:, 3 * d + m_hidden:]
        o = attention(apply_rope_pairs(q, cos, sin), apply_rope_pairs(k, cos, sin), v)
        h = h + M_sgl[2] * linear(np.concatenate([o, silu(g) * up], axis=1), W[p + "to_out.weight"])
        cap[f"single_transformer_blocks.{j}"] = h

    y = adaln(h[L:], shift_f, scale_f, eps)
    v = linear(y, W["proj_out.weight"])
    cap["proj_out"] = v
    return v


# --------------------------------------------------------------------------- schedule [§4.4]

def empirical_mu(n, steps):
    a1, b1 = 8.73809524e-05, 1.89833333
    a2, b2 = 0.00016927, 0.45666666
    if n > 4300:
        return a2 * n + b2
    m200 = a2 * n + b2
    m10 = a1 * n + b1
    a = (m200 - m10) / 190.0
    b = m200 - 200.0 * a
    return a * steps + b


def schedule(steps, n, kind="shifted", power_alpha=2.0):
    """σ_0 … σ_S (σ_0 = 1, σ_S = 0)."""
    tau = 1.0 - np.arange(steps + 1, dtype=np.float64) / steps
    if kind == "linear":
        return tau
    if kind == "power":
        return 1.0 - (np.arange(steps + 1, dtype=np.float64) / steps) ** power_alpha
    mu = empirical_mu(n, steps)
    if OFFICIAL_F32_TIME:  # torch.linspace(1, 0, S+1) then the shift, all in float32
        f32 = np.float32
        step = f32(-1.0) / f32(steps)
        t = np.array([f32(1.0) + step * f32(i) if i < (steps + 1) // 2 else f32(0.0) - step * f32(steps - i)
                      for i in range(steps + 1)], dtype=f32)
        e = f32(math.exp(mu))
        with np.errstate(divide="ignore"):
            r = (f32(1.0) / t) - f32(1.0)
            # python_float / tensor is evaluated by torch as reciprocal(tensor) · float
            return ((f32(1.0) / (e + r)) * e).astype(np.float64)
    out = np.zeros(steps + 1)
    for i, t in enumerate(tau):
        out[i] = 0.0 if t <= 0 else math.exp(mu) / (math.exp(mu) + (1.0 / t - 1.0))
    return out


# --------------------------------------------------------------------------- latents [§4.3, §4.7]

def patchify(z):
    """[32, 2h, 2w] → [128, h, w], c' = 4c + 2·pi + pj."""
    C, H2, W2 = z.shape
    return z.reshape(C, H2 // 2, 2, W2 // 2, 2).transpose(0, 2, 4, 1, 3).reshape(C * 4, H2 // 2, W2 // 2)


def unpatchify(z):
    C4, h, w = z.shape
    return z.reshape(C4 // 4, 2, 2, h, w).transpose(0, 3, 1, 4, 2).reshape(C4 // 4, 2 * h, 2 * w)


def pack(z):
    """[128, h, w] → [h·w, 128]."""
    return z.reshape(z.shape[0], -1).T


def unpack(x, h, w):
    return x.T.reshape(x.shape[1], h, w)


def bn_stats(m):
    eps = m.vcfg.get("batch_norm_eps", 1e-4)
    return m.V["bn.running_mean"], np.sqrt(m.V["bn.running_var"] + eps)


def bn_denormalize(m, z):
    mean, std = bn_stats(m)
    return z * std[:, None, None] + mean[:, None, None]


def bn_normalize(m, z):
    mean, std = bn_stats(m)
    return (z - mean[:, None, None]) / std[:, None, None]


# --------------------------------------------------------------------------- VAE [§5]

def conv2d(x, w, b, stride=1, pad=(1, 1, 1, 1)):
    """x [C, H, W], w [O, C, kh, kw]; pad = (top, bottom, left, right) zeros."""
    C, H, W = x.shape
    O, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (pad[0], pad[1]), (pad[2], pad[3])))
    Ho = (xp.shape[1] - kh) // stride + 1
    Wo = (xp.shape[2] - kw) // stride + 1
    y = np.zeros((O, Ho, Wo))
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, i:i + stride * (Ho - 1) + 1:stride, j:j + stride * (Wo - 1) + 1:stride]
            y += np.tensordot(w[:, :, i, j], patch, axes=(1, 0))
    return y + b[:, None, None]


def group_norm(x, w, b, groups=32, eps=1e-6):
    C, H, W = x.shape
    g = x.reshape(groups, -1)
    mu = g.mean(axis=1, keepdims=True)
    var = ((g - mu) ** 2).mean(axis=1, keepdims=True)
    y = ((g - mu) / np.sqrt(var + eps)).reshape(C, H, W)
    return y * w[:, None, None] + b[:, None, None]


class VAE:
    def __init__(self, m):
        self.W = m.V
        self.c = m.vcfg
        self.groups = self.c.get("norm_num_groups", 32)

    def gn(self, x, p):
        return group_norm(x, self.W[p + ".weight"], self.W[p + ".bias"], self.groups, 1e-6)

    def conv(self, x, p, stride=1, pad=None):
        w = self.W[p + ".weight"]
        if pad is None:
            k = w.shape[2] // 2
            pad = (k, k, k, k)
        return conv2d(x, w, self.W[p + ".bias"], stride, pad)

    def resnet(self, x, p):
        h = self.conv(silu(self.gn(x, p + ".norm1")), p + ".conv1")
        h = self.conv(silu(self.gn(h, p + ".norm2")), p + ".conv2")
        skip = self.conv(x, p + ".conv_shortcut") if p + ".conv_shortcut.weight" in self.W else x
        return skip + h

    def attn(self, x, p):
        C, H, W = x.shape
        t = self.gn(x, p + ".group_norm").reshape(C, H * W).T          # [HW, C]
        q = linear(t, self.W[p + ".to_q.weight"], self.W[p + ".to_q.bias"])
        k = linear(t, self.W[p + ".to_k.weight"], self.W[p + ".to_k.bias"])
        v = linear(t, self.W[p + ".to_v.weight"], self.W[p + ".to_v.bias"])
        o = softmax(q @ k.T / math.sqrt(C)) @ v
        o = linear(o, self.W[p + ".to_out.0.weight"], self.W[p + ".to_out.0.bias"])
        return o.T.reshape(C, H, W) + x

    def mid(self, x, side, cap):
        for name, fn in (("resnets.0", self.resnet), ("attentions.0", self.attn), ("resnets.1", self.resnet)):
            x = fn(x, f"{side}.mid_block.{name}")
            cap[f"{side}.mid_block.{name}"] = x
        return x

    def decode(self, z, capture=None):
        """z [32, H/8, W/8] (de-normalised, unpatchified) → [3, H, W]."""
        cap = capture if capture is not None else {}
        n_blocks = len(self.c["block_out_channels"])
        x = self.conv(z, "post_quant_conv")
        cap["post_quant_conv"] = x
        x = self.conv(x, "decoder.conv_in")
        cap["decoder.conv_in"] = x
        x = self.mid(x, "decoder", cap)
        for i in range(n_blocks):
            for j in range(self.c["layers_per_block"] + 1):
                p = f"decoder.up_blocks.{i}.resnets.{j}"
                x = self.resnet(x, p)
                cap[p] = x
            if i < n_blocks - 1:
                x = x.repeat(2, axis=1).repeat(2, axis=2)                 # nearest ×2
                p = f"decoder.up_blocks.{i}.upsamplers.0"
                x = self.conv(x, p + ".conv")
                cap[p] = x
        x = self.gn(x, "decoder.conv_norm_out")
        cap["decoder.conv_norm_out"] = x
        x = self.conv(silu(x), "decoder.conv_out")
        cap["decoder.conv_out"] = x
        return x

    def encode_mean(self, img, capture=None):
        """img [3, H, W] in [−1, 1] → posterior mean [32, H/8, W/8]."""
        cap = capture if capture is not None else {}
        n_blocks = len(self.c["block_out_channels"])
        x = self.conv(img, "encoder.conv_in")
        cap["encoder.conv_in"] = x
        for i in range(n_blocks):
            for j in range(self.c["layers_per_block"]):
                p = f"encoder.down_blocks.{i}.resnets.{j}"
                x = self.resnet(x, p)
                cap[p] = x
            if i < n_blocks - 1:
                p = f"encoder.down_blocks.{i}.downsamplers.0"
                x = self.conv(x, p + ".conv", stride=2, pad=(0, 1, 0, 1))  # right/bottom pad only
                cap[p] = x
        x = self.mid(x, "encoder", cap)
        x = self.gn(x, "encoder.conv_norm_out")
        cap["encoder.conv_norm_out"] = x
        x = self.conv(silu(x), "encoder.conv_out")
        cap["encoder.conv_out"] = x
        x = self.conv(x, "quant_conv")
        cap["quant_conv"] = x
        return x[: x.shape[0] // 2]


def decode_latents(m, z_packed, h, w, capture=None):
    """Target tokens [N, 128] (BN-normalised) → (decoder_in [32, 2h, 2w], image [3, 16h, 16w])."""
    z = unpatchify(bn_denormalize(m, unpack(z_packed, h, w)))
    return z, VAE(m).decode(z, capture)


def encode_reference(m, img, capture=None):
    """img [3, H, W] in [−1, 1] → BN-normalised packed-space latents [128, H/16, W/16]."""
    return bn_normalize(m, patchify(VAE(m).encode_mean(img, capture)))


# --------------------------------------------------------------------------- images [§5.4, §7]

def load_image(path, max_area=1024 * 1024):
    """PNG/JPEG → [3, H, W] in [−1, 1]: RGB, area cap (LANCZOS), centre crop to multiples of 16."""
    from PIL import Image
    im = Image.open(path).convert("RGB")
    W, H = im.size
    if W * H > max_area:
        s = math.sqrt(max_area / (W * H))
        im = im.resize((int(W * s), int(H * s)), Image.LANCZOS)
        W, H = im.size
    W16, H16 = W // 16 * 16, H // 16 * 16
    left, top = (W - W16) // 2, (H - H16) // 2
    im = im.crop((left, top, left + W16, top + H16))
    a = np.asarray(im, dtype=np.float64) / 255.0
    return (a * 2.0 - 1.0).transpose(2, 0, 1)


def to_uint8(img):
    """diffusers rounding: round(clip(x/2 + 0.5, 0, 1)·255) → [H, W, 3] uint8."""
    return np.round(np.clip(img / 2.0 + 0.5, 0.0, 1.0) * 255.0).astype(np.uint8).transpose(1, 2, 0)


def save_png(img, path):
    from PIL import Image
    Image.fromarray(to_uint8(img)).save(path)


# --------------------------------------------------------------------------- sampler [§4, §7]

def generate(m, emb, noise, steps, refs=(), neg_emb=None, guidance=1.0, sched="shifted",
             power_alpha=2.0, record=None):
    """Full denoising loop.

    emb [512, J]; noise [128, h, w]; refs: list of BN-normalised reference latents
    [128, h_r, w_r]; neg_emb (base model CFG) with guidance g: v = v_u + g·(v_c − v_u).
    record (dict) receives sigmas, stepKK_in / stepKK_v (/_v_cond / _v_uncond), latents.
    Returns the final packed target tokens [N, 128]."""
    rec = record if record is not None else {}
    _, h, w = noise.shape
    N = h * w
    x = pack(noise).copy()
    ids = [image_ids(h, w)]
    ref_tokens = []
    for r, z in enumerate(refs):
        ids.append(image_ids(z.shape[1], z.shape[2], t=10 * (r + 1)))
        ref_tokens.append(pack(z))
    ids = np.concatenate(ids)
    sig = schedule(steps, N, sched, power_alpha)
    rec["sigmas"] = sig
    use_cfg = neg_emb is not None and guidance > 1.0
    for i in range(steps):
        rec[f"step{i:02d}_in"] = x.copy()
        xin = np.concatenate([x] + ref_tokens)
        v_c = transformer(m, xin, ids, emb, sig[i])[:N]
        if use_cfg:
            v_u = transformer(m, xin, ids, neg_emb, sig[i])[:N]
            v = v_u + guidance * (v_c - v_u)
            rec[f"step{i:02d}_v_cond"], rec[f"step{i:02d}_v_uncond"] = v_c, v_u
        else:
            v = v_c
        rec[f"step{i:02d}_v"] = v
        x = x + (sig[i + 1] - sig[i]) * v
    rec["latents_packed"] = x
    rec["latents"] = unpack(x, h, w)
    return x
