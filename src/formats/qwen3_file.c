/*
 * qwen3_file.c — single-file Qwen3 text encoders: llama.cpp names mapped
 * onto the Hugging Face names (qwen3_file.h).
 */
#include "qwen3_file.h"

#include "name_table.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* per-layer names: llama.cpp suffix ↔ Hugging Face suffix */
static const struct {
    const char *llama, *hf;
} layer_names[] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"attn_q_norm.weight", "self_attn.q_norm.weight"},
    {"attn_k_norm.weight", "self_attn.k_norm.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
};
static const struct {
    const char *llama, *hf;
} global_names[] = {
    {"token_embd.weight", "model.embed_tokens.weight"},
    {"output_norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},
};
#define N_LAYER_NAMES (sizeof layer_names / sizeof *layer_names)
#define N_GLOBAL_NAMES (sizeof global_names / sizeof *global_names)

int fx_qwen3_hf_name(const char *name, char *out, size_t size) {
    for (size_t i = 0; i < N_GLOBAL_NAMES; i++)
        if (!strcmp(name, global_names[i].llama)) return snprintf(out, size, "%s", global_names[i].hf) < (int)size;
    int n;
    const char *rest = fx_name_after_index(name, "blk.", &n);
    for (size_t i = 0; rest && i < N_LAYER_NAMES; i++)
        if (!strcmp(rest, layer_names[i].llama))
            return snprintf(out, size, "model.layers.%d.%s", n, layer_names[i].hf) < (int)size;
    return 0;
}

int fx_qwen3_llama_name(const char *name, char *out, size_t size) {
    for (size_t i = 0; i < N_GLOBAL_NAMES; i++)
        if (!strcmp(name, global_names[i].hf)) return snprintf(out, size, "%s", global_names[i].llama) < (int)size;
    int n;
    const char *rest = fx_name_after_index(name, "model.layers.", &n);
    for (size_t i = 0; rest && i < N_LAYER_NAMES; i++)
        if (!strcmp(rest, layer_names[i].hf)) return snprintf(out, size, "blk.%d.%s", n, layer_names[i].llama) < (int)size;
    return 0;
}

fx_wset *fx_qwen3_file_open(const char *path, int use_mmap, const fx_logger *log, fx_err *err) {
    fx_wset *base = fx_wset_open(path, path, use_mmap, err);
    return base ? fx_qwen3_file_wrap(base, log, err) : NULL;
}

fx_wset *fx_qwen3_file_wrap(fx_wset *base, const fx_logger *log, fx_err *err) {
    char path[1024];
    snprintf(path, sizeof path, "%s", fx_wset_display(base));
    const size_t n = fx_wset_count(base);
    size_t llama = 0, hf = 0;
    if (fx_wset_refuse_foreign(base, err)) { /* NVFP4, GPTQ, ...: named */
        fx_wset_close(base);
        return NULL;
    }
    char mapped[FX_ST_MAX_NAME];
    for (size_t i = 0; i < n; i++) {
        const char *name = fx_wset_tensor_at(base, i)->name;
        llama += fx_qwen3_hf_name(name, mapped, sizeof mapped) != 0;
        hf += !strncmp(name, "model.layers.", 13) || !strcmp(name, "model.embed_tokens.weight");
    }
    if (!llama && !hf) {
        fx_wset_close(base);
        fx_fail(err, FLUX_ERR_MODEL,
                "%s: not a Qwen3 text encoder: no llama.cpp (token_embd.weight, blk.N.attn_q.weight, ...) or Hugging "
                "Face (model.layers.N...) tensor names",
                path);
        return NULL;
    }
    if (llama && hf) {
        fx_wset_close(base);
        fx_fail(err, FLUX_ERR_MODEL, "%s: mixes llama.cpp (%zu) and Hugging Face (%zu) tensor names", path, llama, hf);
        return NULL;
    }
    if (hf) {
        fx_log(log, 1, "flux: %s: Qwen3 text encoder with Hugging Face names, %zu tensors", path, n);
        return base;
    }
    fx_wset *view = fx_wset_view_new(base, path, n, err);
    if (!view) return NULL;
    size_t ignored = 0;
    for (size_t i = 0; i < n; i++) {
        const fx_tensor *t = fx_wset_tensor_at(base, i);
        if (!fx_qwen3_hf_name(t->name, mapped, sizeof mapped)) {
            ignored++;
            fx_log(log, 2, "flux: %s: ignoring tensor '%s'", path, t->name);
            continue;
        }
        fx_wset_range r = {t->name, 0, t->shape.ndim ? t->shape.d[0] : 0};
        if (t->shape.ndim == 0 || fx_wset_view_add(view, mapped, &r, 1, err) != FLUX_OK) {
            if (t->shape.ndim == 0)
                fx_fail(err, FLUX_ERR_MODEL, "%s: tensor '%.200s' is a scalar, expected a weight", path, t->name);
            fx_wset_close(view);
            return NULL;
        }
    }
    fx_log(log, 1, "flux: %s: Qwen3 text encoder with llama.cpp names, %zu tensors mapped, %zu ignored", path,
           fx_wset_count(view), ignored);
    return view;
}
