#!/usr/bin/env python3
"""qwen3_gguf_writer.py — the golden text encoder as a llama.cpp-style Qwen3
GGUF file WITH its vocabulary (tokenizer.ggml.* arrays), written independently
of flux.c with json + struct only (tests/pipeline/test_three_files.c).

    python3 qwen3_gguf_writer.py MODEL_DIR OUT.gguf [--pre NAME]

What llama.cpp's convert_hf_to_gguf.py writes for Qwen3 (model code
conversion/base.py get_vocab_base, gguf-py gguf/constants.py, gguf/gguf_writer.py):
  - GGUF v3, alignment 32, little-endian; tensor dims reversed (ne[0] the
    contiguous one); tensors stored as they are in the safetensors (BF16,
    ggml type 30), with llama.cpp names (token_embd, blk.N.attn_q, ...);
  - general.architecture "qwen3" and the qwen3.* hyper-parameters;
  - tokenizer.ggml.model "gpt2", tokenizer.ggml.pre "qwen2" (--pre changes it,
    for the refusal test);
  - tokenizer.ggml.tokens: for every id < vocab_size the token text (the
    tokenizer.json vocab's byte-level form, or an added token's content) or
    "[PAD<id>]" where no token has that id; tokenizer.ggml.token_type: NORMAL 1
    for vocab tokens, CONTROL 3 for added tokens that are special or look
    special (<|...|>), USER_DEFINED 4 for the other added tokens, UNUSED 5 for
    the holes; tokenizer.ggml.merges: the merges as "a b" strings, in order;
  - the special-token ids (eos, padding) as u32.
"""
import json
import os
import struct
import sys

GGML_BF16, GGML_F32 = 30, 0
T_U32, T_I32, T_F32, T_BOOL, T_STRING, T_ARRAY = 4, 5, 6, 7, 8, 9

LAYER = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}


def llama_name(hf):
    if hf == "model.embed_tokens.weight":
        return "token_embd.weight"
    if hf == "model.norm.weight":
        return "output_norm.weight"
    if hf == "lm_head.weight":
        return "output.weight"
    parts = hf.split(".", 3)  # model, layers, N, rest
    return "blk.%s.%s" % (parts[2], LAYER[parts[3]])


def read_tensors(te_dir):
    index = json.load(open(os.path.join(te_dir, "model.safetensors.index.json")))
    out = {}
    for shard in sorted(set(index["weight_map"].values())):
        with open(os.path.join(te_dir, shard), "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(n))
            data = f.read()
        for name, t in header.items():
            if name == "__metadata__":
                continue
            a, b = t["data_offsets"]
            out[name] = (t["shape"], t["dtype"], data[a:b])
    return out


def gstr(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def kv(key, vtype, payload):
    return gstr(key) + struct.pack("<I", vtype) + payload


def kv_str(key, s):
    return kv(key, T_STRING, gstr(s))


def kv_u32(key, v):
    return kv(key, T_U32, struct.pack("<I", v))


def kv_f32(key, v):
    return kv(key, T_F32, struct.pack("<f", v))


def kv_arr_str(key, items):
    return kv(key, T_ARRAY, struct.pack("<IQ", T_STRING, len(items)) + b"".join(gstr(s) for s in items))


def kv_arr_i32(key, items):
    return kv(key, T_ARRAY, struct.pack("<IQ", T_I32, len(items)) + struct.pack("<%di" % len(items), *items))


def vocabulary(tok_path, vocab_size):
    t = json.load(open(tok_path, encoding="utf-8"))
    reverse = {i: s for s, i in t["model"]["vocab"].items()}
    added = {a["id"]: a for a in t["added_tokens"]}
    tokens, types = [], []
    for i in range(vocab_size):
        if i in added:
            content = added[i]["content"]
            special = added[i]["special"] or (content.startswith("<|") and content.endswith("|>"))
            tokens.append(content)
            types.append(3 if special else 4)
        elif i in reverse:
            tokens.append(reverse[i])
            types.append(1)
        else:
            tokens.append("[PAD%d]" % i)
            types.append(5)
    merges = [m if isinstance(m, str) else " ".join(m) for m in t["model"]["merges"]]
    return tokens, types, merges, added


def main():
    model, out = sys.argv[1], sys.argv[2]
    pre = sys.argv[4] if len(sys.argv) > 4 and sys.argv[3] == "--pre" else "qwen2"
    cfg = json.load(open(os.path.join(model, "text_encoder", "config.json")))
    tensors = read_tensors(os.path.join(model, "text_encoder"))
    tokens, types, merges, added = vocabulary(os.path.join(model, "tokenizer", "tokenizer.json"), cfg["vocab_size"])
    ids = {a["content"]: i for i, a in added.items()}

    kvs = [
        kv_str("general.architecture", "qwen3"),
        kv_str("general.name", "Qwen3 golden tiny"),
        kv_u32("qwen3.block_count", cfg["num_hidden_layers"]),
        kv_u32("qwen3.context_length", cfg["max_position_embeddings"]),
        kv_u32("qwen3.embedding_length", cfg["hidden_size"]),
        kv_u32("qwen3.feed_forward_length", cfg["intermediate_size"]),
        kv_u32("qwen3.attention.head_count", cfg["num_attention_heads"]),
        kv_u32("qwen3.attention.head_count_kv", cfg["num_key_value_heads"]),
        kv_u32("qwen3.attention.key_length", cfg["head_dim"]),
        kv_u32("qwen3.attention.value_length", cfg["head_dim"]),
        kv_f32("qwen3.rope.freq_base", float(cfg["rope_theta"])),
        kv_f32("qwen3.attention.layer_norm_rms_epsilon", float(cfg["rms_norm_eps"])),
        kv_str("tokenizer.ggml.model", "gpt2"),
        kv_str("tokenizer.ggml.pre", pre),
        kv_arr_str("tokenizer.ggml.tokens", tokens),
        kv_arr_i32("tokenizer.ggml.token_type", types),
        kv_arr_str("tokenizer.ggml.merges", merges),
        kv_u32("tokenizer.ggml.eos_token_id", ids["<|im_end|>"]),
        kv_u32("tokenizer.ggml.padding_token_id", ids["<|endoftext|>"]),
    ]
    names = sorted(tensors)
    infos, blobs, offset = [], [], 0
    for hf in names:
        shape, dtype, raw = tensors[hf]
        gtype = {"BF16": GGML_BF16, "F32": GGML_F32}[dtype]
        ne = list(reversed(shape))
        infos.append(gstr(llama_name(hf)) + struct.pack("<I", len(ne)) + struct.pack("<%dQ" % len(ne), *ne) +
                     struct.pack("<IQ", gtype, offset))
        pad = b"\0" * (-len(raw) % 32)
        blobs.append(raw + pad)
        offset += len(raw) + len(pad)
    head = b"GGUF" + struct.pack("<IQQ", 3, len(infos), len(kvs)) + b"".join(kvs) + b"".join(infos)
    head += b"\0" * (-len(head) % 32)
    with open(out + ".tmp", "wb") as f:
        f.write(head)
        for b in blobs:
            f.write(b)
    os.replace(out + ".tmp", out)


if __name__ == "__main__":
    main()
