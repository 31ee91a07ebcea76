#!/usr/bin/python3
"""gen_lora_layouts.py — small adapters in each trainer's key layout for the
tiny golden model, and the weights they should give, merged here in NumPy
(float64) independently of flux.c (tests/pipeline/test_lora_layouts.c).

    /usr/bin/python3 tools/gen_lora_layouts.py [OUT_DIR]
        (default tests/formats/lora_layouts; needs numpy, nothing else)

Reads tests/golden/model/transformer/diffusion_pytorch_model.safetensors
(bf16), writes per layout NAME.safetensors (the adapter, bf16 factors unless
said) and NAME.expected.safetensors (every model tensor the adapter changes,
merged, float32), and MANIFEST.txt (layout, strength, tensors).

The layouts follow the key names and rules of the trainers (not produced by
them: none runs here):
  ai-toolkit      diffusion_model.<BFL module>.lora_A/.lora_B.weight, no alpha (scale 1)
  ai-toolkit DoRA the same + .magnitude [out]
  kohya / musubi  lora_unet_<BFL module, '.'→'_'>.lora_down/.lora_up.weight + .alpha (α/r)
  diffusers PEFT  transformer.<diffusers module>.lora_A/.lora_B.weight, α in the header
                  "lora_adapter_metadata" (transformer.lora_alpha, transformer.r)
  PEFT DoRA       base_model.model.<diffusers module>.lora_A/B.weight +
                  .lora_magnitude_vector [out], metadata lora_alpha, r, use_dora
  LyCORIS LoCon   lycoris_<BFL module flattened>.lora_down/up.weight + .alpha + .dora_scale [out, 1]
  LyCORIS LoKr    lycoris_<…>.lokr_w1 [4, 4] + .lokr_w2_a [16, r] · .lokr_w2_b [r, 16] + .alpha (α/r)
  LyCORIS LoHa    lycoris_<…>.hada_w1_a/_b, hada_w2_a/_b + .alpha (α/r) + .dora_scale [out, 1]
Merges: LoRA-like W + λ·s·ΔW; DoRA per output row i
  W_i + λ·(g_i·(W_i + s·ΔW_i) − W_i),  g_i = m_i / ‖W_i + s·ΔW_i‖
(PEFT / ai-toolkit / LyCORIS at λ = 1; λ ≠ 1 interpolates, as ComfyUI).
BFL → diffusers rows: double_blocks.N.img_attn.qkv = to_q, to_k, to_v
stacked; img_attn.proj = attn.to_out.0, txt_attn.proj = attn.to_add_out;
img_in = x_embedder.
"""
import json
import os
import struct
import sys

import numpy as np

from safetensors_raw import read_raw

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "tests/golden/model/transformer/diffusion_pytorch_model.safetensors")


def read_safetensors(path):
    out = {}
    for name, (shape, raw, dtype) in read_raw(path).items():
        if dtype == "BF16":
            v = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        elif dtype == "F32":
            v = np.frombuffer(raw, dtype="<f4")
        else:
            raise SystemExit(f"{path}: {name}: dtype {dtype}")
        out[name] = v.astype(np.float64).reshape(shape)
    return out


def to_bf16(x):
    """float64 → bf16 bits (round to nearest even via float32), and the rounded values."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return u, (u.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def write_safetensors(path, tensors, metadata=None):
    """tensors: name → (dtype "BF16"|"F32", array of that dtype's bits or values)."""
    header, blobs, off = {}, [], 0
    for name, (dt, arr) in tensors.items():
        raw = np.ascontiguousarray(arr).astype("<u2" if dt == "BF16" else "<f4").tobytes()
        header[name] = {"dtype": dt, "shape": list(arr.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


class Layout:
    def __init__(self, name, strength=1.0, metadata=None):
        self.name, self.strength, self.metadata = name, strength, metadata
        self.tensors = {}    # adapter tensors
        self.expected = {}   # diffusers tensor → merged weight

    def bf16(self, key, values):
        bits, v = to_bf16(values)
        self.tensors[key] = ("BF16", bits)
        return v

    def f32(self, key, values):
        v = np.asarray(values, dtype=np.float32)
        self.tensors[key] = ("F32", v)
        return v.astype(np.float64)


def module_rows(model, tensors):
    """The module's W [out, in] as its tensors' rows stacked (a copy)."""
    return np.concatenate([model[t] for t in tensors], axis=0)


def merge(model, lay, tensors, dw, s, magnitude=None):
    """Merge s·ΔW (DoRA when magnitude is given) into the module's tensors."""
    lam = lay.strength
    w = module_rows(model, tensors)
    if magnitude is None:
        merged = w + lam * s * dw
    else:
        v = w + s * dw
        g = magnitude / np.linalg.norm(v, axis=1)
        merged = w + lam * (g[:, None] * v - w)
    r0 = 0
    for t in tensors:
        n = model[t].shape[0]
        lay.expected[t] = merged[r0:r0 + n].astype(np.float32)
        r0 += n


def magnitudes(model, tensors, dw, s, rng):
    """m = ‖W + sΔW‖ per row × (1 ± 20 %): DoRA's starting point, moved."""
    v = module_rows(model, tensors) + s * dw
    return np.linalg.norm(v, axis=1) * (1.0 + 0.2 * rng.uniform(-1, 1, v.shape[0]))


def lowrank(lay, rng, down_key, up_key, out, inp, rank, amp):
    a = lay.bf16(down_key, rng.normal(0, 1 / np.sqrt(inp), (rank, inp)))
    b = lay.bf16(up_key, rng.normal(0, amp / np.sqrt(rank * inp), (out, rank)))
    return b @ a


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests/formats/lora_layouts")
    os.makedirs(out_dir, exist_ok=True)
    model = read_safetensors(MODEL)
    rng = np.random.default_rng(20261128)
    T = "transformer_blocks"
    qkv0 = [f"{T}.0.attn.to_q.weight", f"{T}.0.attn.to_k.weight", f"{T}.0.attn.to_v.weight"]
    layouts = []

    # ai-toolkit, plain LoRA on a fused BFL qkv (its thirds: to_q, to_k, to_v)
    lay = Layout("aitoolkit_lora")
    m = "diffusion_model.double_blocks.0.img_attn.qkv"
    dw = lowrank(lay, rng, m + ".lora_A.weight", m + ".lora_B.weight", 192, 64, 4, 0.5)
    merge(model, lay, qkv0, dw, 1.0)
    layouts.append(lay)

    # ai-toolkit DoRA (magnitude [out], bf16 as the trainer saves it)
    lay = Layout("aitoolkit_dora")
    m, t = "diffusion_model.double_blocks.1.txt_attn.proj", [f"{T}.1.attn.to_add_out.weight"]
    dw = lowrank(lay, rng, m + ".lora_A.weight", m + ".lora_B.weight", 64, 64, 4, 0.5)
    mag = lay.bf16(m + ".magnitude", magnitudes(model, t, dw, 1.0, rng))
    merge(model, lay, t, dw, 1.0, mag)
    layouts.append(lay)

    # kohya / musubi-tuner, α = 2, r = 4, at strength 0.7
    lay = Layout("kohya", 0.7)
    m, t = "lora_unet_double_blocks_1_img_attn_proj", [f"{T}.1.attn.to_out.0.weight"]
    dw = lowrank(lay, rng, m + ".lora_down.weight", m + ".lora_up.weight", 64, 64, 4, 1.0)
    lay.f32(m + ".alpha", np.float32(2.0))
    merge(model, lay, t, dw, 2.0 / 4)
    layouts.append(lay)

    # diffusers / PEFT with its metadata (α 8, r 4)
    lay = Layout("diffusers_peft", metadata={"format": "pt", "lora_adapter_metadata": json.dumps(
        {"transformer.r": 4, "transformer.lora_alpha": 8, "transformer.use_dora": False})})
    m, t = f"transformer.{T}.1.attn.to_k", [f"{T}.1.attn.to_k.weight"]
    dw = lowrank(lay, rng, m + ".lora_A.weight", m + ".lora_B.weight", 64, 64, 4, 0.25)
    merge(model, lay, t, dw, 8 / 4)
    layouts.append(lay)

    # PEFT DoRA (lora_magnitude_vector, f32), α 4, r 4
    lay = Layout("peft_dora", metadata={"format": "pt", "lora_adapter_metadata": json.dumps(
        {"r": 4, "lora_alpha": 4, "use_dora": True})})
    m, t = f"base_model.model.{T}.1.attn.to_v", [f"{T}.1.attn.to_v.weight"]
    dw = lowrank(lay, rng, m + ".lora_A.weight", m + ".lora_B.weight", 64, 64, 4, 0.5)
    mag = lay.f32(m + ".lora_magnitude_vector", magnitudes(model, t, dw, 1.0, rng))
    merge(model, lay, t, dw, 1.0, mag)
    layouts.append(lay)

    # LyCORIS LoCon + DoRA (dora_scale [out, 1], f32), α 8, r 8, at strength 0.6
    lay = Layout("lycoris_locon_dora", 0.6)
    m, t = "lycoris_double_blocks_0_txt_attn_proj", [f"{T}.0.attn.to_add_out.weight"]
    dw = lowrank(lay, rng, m + ".lora_down.weight", m + ".lora_up.weight", 64, 64, 8, 0.5)
    lay.f32(m + ".alpha", np.float32(8.0))
    mag = lay.f32(m + ".dora_scale", magnitudes(model, t, dw, 1.0, rng).reshape(64, 1)).reshape(64)
    merge(model, lay, t, dw, 1.0, mag)
    layouts.append(lay)

    # LyCORIS LoKr: W1 [4, 4] ⊗ (w2_a [16, 2] · w2_b [2, 16]), α 1 → scale 1/2
    lay = Layout("lycoris_lokr")
    m, t = "lycoris_double_blocks_0_img_attn_proj", [f"{T}.0.attn.to_out.0.weight"]
    w1 = lay.bf16(m + ".lokr_w1", rng.normal(0, 1, (4, 4)))
    w2a = lay.bf16(m + ".lokr_w2_a", rng.normal(0, 0.3, (16, 2)))
    w2b = lay.bf16(m + ".lokr_w2_b", rng.normal(0, 0.3, (2, 16)))
    lay.f32(m + ".alpha", np.float32(1.0))
    merge(model, lay, t, np.kron(w1, w2a @ w2b), 0.5)
    layouts.append(lay)

    # LyCORIS LoHa + DoRA on img_in (x_embedder [64, 128]), α 2, r 2 → scale 1
    lay = Layout("lycoris_loha_dora")
    m, t = "lycoris_img_in", ["x_embedder.weight"]
    w1a = lay.bf16(m + ".hada_w1_a", rng.normal(0, 0.3, (64, 2)))
    w1b = lay.bf16(m + ".hada_w1_b", rng.normal(0, 0.3, (2, 128)))
    w2a = lay.bf16(m + ".hada_w2_a", rng.normal(0, 0.3, (64, 2)))
    w2b = lay.bf16(m + ".hada_w2_b", rng.normal(0, 0.3, (2, 128)))
    lay.f32(m + ".alpha", np.float32(2.0))
    dw = (w1a @ w1b) * (w2a @ w2b)
    mag = lay.f32(m + ".dora_scale", magnitudes(model, t, dw, 1.0, rng).reshape(64, 1)).reshape(64)
    merge(model, lay, t, dw, 1.0, mag)
    layouts.append(lay)

    manifest = [f"# made by tools/gen_lora_layouts.py with python {sys.version.split()[0]}, numpy {np.__version__}",
                "# layout strength tensors..."]
    for lay in layouts:
        write_safetensors(os.path.join(out_dir, lay.name + ".safetensors"), lay.tensors, lay.metadata)
        write_safetensors(os.path.join(out_dir, lay.name + ".expected.safetensors"),
                          {k: ("F32", v) for k, v in lay.expected.items()})
        manifest.append(f"{lay.name} {lay.strength:g} " + " ".join(lay.expected))
    with open(os.path.join(out_dir, "MANIFEST.txt"), "w") as f:
        f.write("\n".join(manifest) + "\n")
    print(f"wrote {len(layouts)} layouts to {out_dir}")


if __name__ == "__main__":
    main()
