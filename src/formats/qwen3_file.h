/*
 * qwen3_file.h — a single-file Qwen3 text encoder (flux_load_options.
 * text_encoder_file, CLI --text-encoder), shown to the model code as a
 * weight set with the Hugging Face names (transformers modeling_qwen3.py).
 *
 * Accepted files (GGUF or safetensors, detected by content):
 *   - llama.cpp names, as llama.cpp's converter and the community Qwen3
 *     GGUFs write them (no Q/K row permutation for Qwen3, which uses NEOX
 *     rotate-half RoPE):
 *       token_embd → model.embed_tokens      output_norm → model.norm
 *       output → lm_head
 *       blk.N.attn_norm → model.layers.N.input_layernorm
 *       blk.N.attn_{q,k,v} → model.layers.N.self_attn.{q,k,v}_proj
 *       blk.N.attn_output → ….self_attn.o_proj
 *       blk.N.attn_{q,k}_norm → ….self_attn.{q,k}_norm
 *       blk.N.ffn_norm → model.layers.N.post_attention_layernorm
 *       blk.N.ffn_{gate,up,down} → ….mlp.{gate,up,down}_proj
 *     (each + ".weight"); other names (rope_freqs, ...) are ignored.
 *   - Hugging Face names (model.layers.N...., model.embed_tokens.weight):
 *     used as they are.
 * Renames are views (nothing copied); the data stays mapped, and layers the
 * pipeline never runs are never read. The architecture key/values of a
 * GGUF file are checked against text_encoder/config.json by
 * fx_check_qwen3_file (src/model).
 */
#ifndef FX_QWEN3_FILE_H
#define FX_QWEN3_FILE_H

#include "src/base/log.h"
#include "weight_set.h"

/* Open `path` as a Qwen3 weight set with Hugging Face names. use_mmap as in
 * fx_tensor_file_open (-1: headers only). Errors: those of fx_wset_open;
 * FLUX_ERR_MODEL for a file with neither naming (not a Qwen3 text encoder). */
fx_wset *fx_qwen3_file_open(const char *path, int use_mmap, const fx_logger *log, fx_err *err);

/* The same on an opened set, which the result owns from here on (closed on
 * failure too). */
fx_wset *fx_qwen3_file_wrap(fx_wset *base, const fx_logger *log, fx_err *err);

/* The Hugging Face name of a llama.cpp tensor name into out; 0 if the name
 * has no counterpart. */
int fx_qwen3_hf_name(const char *llama_name, char *out, size_t size);
/* The llama.cpp name of a Hugging Face Qwen3 tensor name; 0 if none. */
int fx_qwen3_llama_name(const char *hf_name, char *out, size_t size);

#endif
