#!/usr/bin/python3
"""gen_gguf_fixtures.py — GGUF files of the tiny golden model made by other
tools, and the values those tools' own dequantizer reads from them
(tests/formats/gguf_fixtures/README.md says which tool made each file).

    /usr/bin/python3 tools/gen_gguf_fixtures.py --gguf-py DIR --comfyui-gguf DIR2 [--sd-cli BIN] [OUT_DIR]
        DIR: llama.cpp's gguf-py folder (the Python package 'gguf'; needs numpy,
             and sentencepiece for its import); DIR2: a city96/ComfyUI-GGUF
             checkout (tools/convert.py; needs torch and tqdm: Debian
             python3-torch, python3-tqdm); BIN: stable-diffusion.cpp's sd-cli.
        OUT_DIR defaults to tests/formats/gguf_fixtures.

Made from tests/golden/model (bf16), renamed here to BFL names (the official
single-file layout, what both converters take):
  flux2-comfy-<T>.gguf  the transformer as ComfyUI-GGUF's pipeline writes it:
        its tools/convert.py, run unmodified (safetensors.torch.load_file given
        by a small shim over torch), writes the BF16 GGUF: BFL names,
        general.architecture "flux", 1-D tensors and tensors of at most 1024
        values F32, the rest BF16; then its patched llama-quantize's rule
        (tools/lcpp.patch) is applied here with gguf-py's quantizer
        (gguf.quants.quantize): 2-D '.weight' tensors become type T except the
        names holding img_in. txt_in. time_in. vector_in. guidance_in. final_layer.
        (kept as stored); general.file_type the llama.cpp ftype of T.
  qwen3-te-Q8_0.gguf    the text encoder as llama.cpp's convert_hf_to_gguf.py
        --outtype q8_0 writes Qwen3: llama.cpp names, the qwen3.* keys of
        TextModel.set_gguf_parameters, 1-D / *_norm tensors F32, the rest Q8_0,
        falling back to F16 where a row is not a multiple of 32 (QuantError), as
        convert_hf_to_gguf.py does; no tokenizer.ggml.* arrays (151936 tokens and
        the merges would add ~5 MB; flux.c reads the folder's tokenizer.json).
  flux2-sdcpp-<t>.gguf  `sd-cli -M convert --diffusion-model BFL.safetensors --type t`
        (stable-diffusion.cpp), when --sd-cli is given.
For every file F, F.expected/: sha256.txt (one line per tensor: name, ggml type,
SHA-256 of the float32 values gguf.quants.dequantize gives, little-endian, row
major) and <tensor>.npy for the smallest tensor of each type in the file.
"""
import argparse
import hashlib
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

from safetensors_raw import read_raw as read_safetensors

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "tests/golden/model")


def bf16_to_f32(raw, shape):
    return (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32).reshape(shape)


def write_safetensors(path, tensors):
    """tensors: name -> (shape, raw bf16 bytes), written in sorted name order."""
    header, off, blobs = {}, 0, []
    for name in sorted(tensors):
        shape, raw = tensors[name]
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [off, off + len(raw)]}
        off += len(raw)
        blobs.append(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)


def bfl_state_dict(st):
    """The golden diffusers transformer under BFL names (diffusers'
    convert_flux2_to_diffusers.py mapping, reversed): name -> (shape, bf16 bytes)."""
    def get(n):
        shape, raw, dtype = st.pop(n)
        assert dtype == "BF16", (n, dtype)
        return shape, raw

    def cat_rows(names):
        parts = [get(n) for n in names]
        rows = sum(p[0][0] for p in parts)
        return (rows,) + parts[0][0][1:], b"".join(p[1] for p in parts)

    out = {}
    T, S = "transformer_blocks", "single_transformer_blocks"
    nd = len({k.split(".")[1] for k in st if k.startswith(T + ".")})
    ns = len({k.split(".")[1] for k in st if k.startswith(S + ".")})
    for i in range(nd):
        p, q = f"{T}.{i}.", f"double_blocks.{i}."
        out[q + "img_attn.qkv.weight"] = cat_rows([p + "attn.to_q.weight", p + "attn.to_k.weight", p + "attn.to_v.weight"])
        out[q + "txt_attn.qkv.weight"] = cat_rows([p + "attn.add_q_proj.weight", p + "attn.add_k_proj.weight",
                                                   p + "attn.add_v_proj.weight"])
        for a, b in [("attn.norm_q.weight", "img_attn.norm.query_norm.scale"),
                     ("attn.norm_k.weight", "img_attn.norm.key_norm.scale"),
                     ("attn.norm_added_q.weight", "txt_attn.norm.query_norm.scale"),
                     ("attn.norm_added_k.weight", "txt_attn.norm.key_norm.scale"),
                     ("attn.to_out.0.weight", "img_attn.proj.weight"),
                     ("attn.to_add_out.weight", "txt_attn.proj.weight"),
                     ("ff.linear_in.weight", "img_mlp.0.weight"), ("ff.linear_out.weight", "img_mlp.2.weight"),
                     ("ff_context.linear_in.weight", "txt_mlp.0.weight"),
                     ("ff_context.linear_out.weight", "txt_mlp.2.weight")]:
            out[q + b] = get(p + a)
    for i in range(ns):
        p, q = f"{S}.{i}.", f"single_blocks.{i}."
        for a, b in [("attn.to_qkv_mlp_proj.weight", "linear1.weight"), ("attn.to_out.weight", "linear2.weight"),
                     ("attn.norm_q.weight", "norm.query_norm.scale"), ("attn.norm_k.weight", "norm.key_norm.scale")]:
            out[q + b] = get(p + a)
    for a, b in [("x_embedder.weight", "img_in.weight"), ("context_embedder.weight", "txt_in.weight"),
                 ("time_guidance_embed.timestep_embedder.linear_1.weight", "time_in.in_layer.weight"),
                 ("time_guidance_embed.timestep_embedder.linear_2.weight", "time_in.out_layer.weight"),
                 ("double_stream_modulation_img.linear.weight", "double_stream_modulation_img.lin.weight"),
                 ("double_stream_modulation_txt.linear.weight", "double_stream_modulation_txt.lin.weight"),
                 ("single_stream_modulation.linear.weight", "single_stream_modulation.lin.weight"),
                 ("proj_out.weight", "final_layer.linear.weight")]:
        out[b] = get(a)
    # diffusers norm_out.linear rows are (scale, shift); BFL adaLN_modulation.1 is (shift, scale)
    shape, raw = get("norm_out.linear.weight")
    half = len(raw) // 2
    out["final_layer.adaLN_modulation.1.weight"] = (shape, raw[half:] + raw[:half])
    assert not st, f"unmapped tensors: {sorted(st)}"
    return out


# safetensors.torch.load_file for convert.py over torch alone (Debian has no
# python3-safetensors): bf16 / f32 tensors of one file, in header order.
SAFETENSORS_SHIM = """
import json, struct, torch
def load_file(path, device="cpu"):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = bytearray(f.read())
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        raw = data[a:b]
        if t["dtype"] == "BF16":
            x = torch.frombuffer(raw, dtype=torch.int16).view(torch.bfloat16)
        elif t["dtype"] == "F32":
            x = torch.frombuffer(raw, dtype=torch.float32)
        else:
            raise ValueError(name + ": " + t["dtype"])
        out[name] = x.reshape(t["shape"]).clone()
    return out
def save_file(tensors, path):
    raise NotImplementedError("not needed for FLUX.2")
"""


def comfy_convert(comfy_dir, gguf_py, src, tmp):
    """ComfyUI-GGUF's tools/convert.py, unmodified, on the BFL file: the
    BF16 GGUF (its F32 rule for 1-D and small tensors)."""
    shim = os.path.join(tmp, "shim", "safetensors")
    os.makedirs(shim, exist_ok=True)
    open(os.path.join(shim, "__init__.py"), "w").close()
    with open(os.path.join(shim, "torch.py"), "w") as f:
        f.write(SAFETENSORS_SHIM)
    dst = os.path.join(tmp, "flux-2-klein-tiny-BF16.gguf")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(tmp, "shim"), gguf_py]))
    subprocess.run([sys.executable, os.path.join(comfy_dir, "tools", "convert.py"), "--src", src, "--dst", dst],
                   check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return dst


def comfy_quantize(gguf, src, qtype, path):
    """What ComfyUI-GGUF's patched llama-quantize (tools/lcpp.patch, arch
    flux) does to convert.py's file, with gguf-py's quantizer: 2-D '.weight'
    tensors become qtype except names holding the embedders / final layer;
    the rest is copied as stored; general.file_type becomes qtype's ftype."""
    Q = gguf.GGMLQuantizationType
    keep = ("img_in.", "txt_in.", "time_in.", "vector_in.", "guidance_in.", "final_layer.")
    ftype = {Q.Q8_0: gguf.LlamaFileType.MOSTLY_Q8_0, Q.Q5_0: gguf.LlamaFileType.MOSTLY_Q5_0,
             Q.Q4_0: gguf.LlamaFileType.MOSTLY_Q4_0}[qtype]
    r = gguf.GGUFReader(src)
    arch = r.fields["general.architecture"]
    w = gguf.GGUFWriter(path, arch=bytes(arch.parts[arch.data[0]]).decode())
    for name, field in r.fields.items():
        if name.startswith("GGUF.") or name in ("general.architecture", "general.file_type",
                                                  "general.quantization_version"):
            continue
        raise SystemExit(f"{src}: unexpected key {name}")
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_file_type(ftype)
    for t in r.tensors:
        shape = tuple(int(n) for n in reversed(t.shape))
        if len(shape) >= 2 and t.name.endswith("weight") and not any(k in t.name for k in keep):
            x = gguf.quants.dequantize(t.data, t.tensor_type).reshape(shape)
            w.add_tensor(t.name, gguf.quants.quantize(x, qtype), raw_dtype=qtype)
        else:
            w.add_tensor(t.name, t.data, raw_shape=t.data.shape, raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def qwen3_file(gguf, path):
    """convert_hf_to_gguf.py --outtype q8_0 for the golden Qwen3 text encoder."""
    Q, MT = gguf.GGMLQuantizationType, gguf.MODEL_TENSOR
    d = os.path.join(MODEL, "text_encoder")
    cfg = json.load(open(os.path.join(d, "config.json")))
    index = json.load(open(os.path.join(d, "model.safetensors.index.json")))
    st = {}
    for shard in sorted(set(index["weight_map"].values())):
        st.update(read_safetensors(os.path.join(d, shard)))
    N = gguf.TENSOR_NAMES
    hf = {"model.embed_tokens.weight": N[MT.TOKEN_EMBD] + ".weight", "model.norm.weight": N[MT.OUTPUT_NORM] + ".weight",
          "lm_head.weight": N[MT.OUTPUT] + ".weight"}
    layer = {"input_layernorm": MT.ATTN_NORM, "post_attention_layernorm": MT.FFN_NORM,
             "self_attn.q_proj": MT.ATTN_Q, "self_attn.k_proj": MT.ATTN_K, "self_attn.v_proj": MT.ATTN_V,
             "self_attn.o_proj": MT.ATTN_OUT, "self_attn.q_norm": MT.ATTN_Q_NORM, "self_attn.k_norm": MT.ATTN_K_NORM,
             "mlp.gate_proj": MT.FFN_GATE, "mlp.up_proj": MT.FFN_UP, "mlp.down_proj": MT.FFN_DOWN}
    for i in range(cfg["num_hidden_layers"]):
        for k, v in layer.items():
            hf[f"model.layers.{i}.{k}.weight"] = N[v].format(bid=i) + ".weight"
    w = gguf.GGUFWriter(path, arch="qwen3")
    w.add_type(gguf.GGUFType.MODEL)
    w.add_name("Qwen3 tiny (flux.c golden text encoder)")
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    w.add_rope_freq_base(cfg["rope_theta"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_key_length(cfg["head_dim"])
    w.add_value_length(cfg["head_dim"])
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    for name, (shape, raw, dtype) in st.items():  # shard order, then each shard's header order
        assert dtype == "BF16", (name, dtype)
        new = hf[name]
        x = bf16_to_f32(raw, shape)
        t = Q.F32 if (x.ndim <= 1 or new.endswith("_norm.weight")) else Q.Q8_0
        try:
            data = gguf.quants.quantize(x, t)
        except gguf.QuantError:
            t = Q.F16
            data = gguf.quants.quantize(x, t)
        w.add_tensor(new, data, raw_dtype=t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def expected(gguf, path):
    """F.expected/: SHA-256 of every tensor's dequantized values, and the
    smallest tensor of each type as .npy."""
    out = path + ".expected"
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(out):
        os.unlink(os.path.join(out, f))
    r = gguf.GGUFReader(path)
    smallest, lines = {}, []
    for t in r.tensors:
        v = gguf.quants.dequantize(t.data, t.tensor_type).astype("<f4")
        shape = tuple(int(n) for n in reversed(t.shape))
        v = np.ascontiguousarray(v.reshape(shape))
        lines.append(f"{t.name} {t.tensor_type.name} {hashlib.sha256(v.tobytes()).hexdigest()}\n")
        if t.tensor_type not in smallest or v.size < smallest[t.tensor_type][1].size:
            smallest[t.tensor_type] = (t.name, v)
    for name, v in smallest.values():
        np.save(os.path.join(out, name + ".npy"), v)
    with open(os.path.join(out, "sha256.txt"), "w") as f:
        f.write(f"# gguf.quants.dequantize (gguf-py {gguf_version(gguf)}) of {os.path.basename(path)}\n")
        f.writelines(lines)


def gguf_version(gguf):
    toml = os.path.join(os.path.dirname(os.path.dirname(gguf.__file__)), "pyproject.toml")
    for line in open(toml):
        if line.startswith("version"):
            return line.split("=")[1].strip().strip('"')
    return "?"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf-py", required=True)
    ap.add_argument("--comfyui-gguf", required=True)
    ap.add_argument("--sd-cli")
    ap.add_argument("out", nargs="?", default=os.path.join(ROOT, "tests/formats/gguf_fixtures"))
    a = ap.parse_args()
    sys.path.insert(0, a.gguf_py)
    import gguf
    os.makedirs(a.out, exist_ok=True)
    st = read_safetensors(os.path.join(MODEL, "transformer/diffusion_pytorch_model.safetensors"))
    bfl = bfl_state_dict({k: v for k, v in st.items()})
    made = []
    Q = gguf.GGMLQuantizationType
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "flux-2-klein-tiny.safetensors")
        write_safetensors(src, bfl)
        bf16 = comfy_convert(a.comfyui_gguf, a.gguf_py, src, tmp)
        for qtype in (Q.Q8_0, Q.Q5_0):
            p = os.path.join(a.out, f"flux2-comfy-{qtype.name}.gguf")
            comfy_quantize(gguf, bf16, qtype, p)
            made.append(p)
        if a.sd_cli:
            for t in ("q8_0", "q4_0"):
                p = os.path.join(a.out, f"flux2-sdcpp-{t}.gguf")
                subprocess.run([a.sd_cli, "-M", "convert", "--diffusion-model", src, "-o", p, "--type", t],
                               check=True, stdout=subprocess.DEVNULL)
                made.append(p)
    p = os.path.join(a.out, "qwen3-te-Q8_0.gguf")
    qwen3_file(gguf, p)
    made.append(p)
    for p in made:
        expected(gguf, p)
        print(f"{os.path.relpath(p, ROOT)}: {os.path.getsize(p)} bytes")


if __name__ == "__main__":
    main()
