/*
 * single_file.c — BFL / ComfyUI single-file transformer checkpoints mapped
 * onto the diffusers names (single_file.h; BFL flux2 model.py names, as diffusers convert_flux2_to_diffusers.py maps them).
 */
#include "single_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A name with one block index: "<prefix><i>.<rest>". Returns the rest and
 * sets *index, or NULL. */
static const char *block_index(const char *name, const char *prefix, int *index) {
    size_t n = strlen(prefix);
    if (strncmp(name, prefix, n)) return NULL;
    const char *p = name + n;
    if (*p < '0' || *p > '9' || (*p == '0' && p[1] >= '0' && p[1] <= '9')) return NULL;
    long v = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        v = v * 10 + (*p - '0');
        if (v > 100000) return NULL;
    }
    if (*p != '.') return NULL;
    *index = (int)v;
    return p + 1;
}

static int one(fx_bfl_target *t, const char *src, int64_t rows, const char *fmt, int index) {
    snprintf(t->name, sizeof t->name, fmt, index);
    t->ranges[0] = (fx_wset_range){src, 0, rows};
    t->n_ranges = 1;
    return 1;
}

/* Fused [q; k; v] rows → three targets named by fmt (with %d = block, %s =
 * q/k/v part). */
static int thirds(fx_bfl_target t[3], const char *src, int64_t rows, int index, const char *const parts[3]) {
    if (rows % 3) return -2;
    for (int k = 0; k < 3; k++) {
        snprintf(t[k].name, sizeof t[k].name, parts[k], index);
        t[k].ranges[0] = (fx_wset_range){src, k * (rows / 3), rows / 3};
        t[k].n_ranges = 1;
    }
    return 3;
}

/* BFL name ↔ diffusers name (BFL flux2 model.py names, as diffusers convert_flux2_to_diffusers.py maps them): whole names, then block-tensor
 * suffixes after "double_blocks.<i>." / "transformer_blocks.<i>." and
 * "single_blocks.<j>." / "single_transformer_blocks.<j>.". */
typedef struct bfl_pair {
    const char *bfl, *diffusers;
} bfl_pair;

static const bfl_pair globals[] = {
    {"img_in.weight", "x_embedder.weight"},
    {"txt_in.weight", "context_embedder.weight"},
    {"time_in.in_layer.weight", "time_guidance_embed.timestep_embedder.linear_1.weight"},
    {"time_in.out_layer.weight", "time_guidance_embed.timestep_embedder.linear_2.weight"},
    {"double_stream_modulation_img.lin.weight", "double_stream_modulation_img.linear.weight"},
    {"double_stream_modulation_txt.lin.weight", "double_stream_modulation_txt.linear.weight"},
    {"single_stream_modulation.lin.weight", "single_stream_modulation.linear.weight"},
    {"final_layer.linear.weight", "proj_out.weight"},
};
/* double-block tensors other than qkv: BFL suffix → diffusers suffix */
static const bfl_pair dbl[] = {
    {"img_attn.norm.query_norm.scale", "attn.norm_q.weight"},
    {"img_attn.norm.key_norm.scale", "attn.norm_k.weight"},
    {"img_attn.proj.weight", "attn.to_out.0.weight"},
    {"img_mlp.0.weight", "ff.linear_in.weight"},
    {"img_mlp.2.weight", "ff.linear_out.weight"},
    {"txt_attn.norm.query_norm.scale", "attn.norm_added_q.weight"},
    {"txt_attn.norm.key_norm.scale", "attn.norm_added_k.weight"},
    {"txt_attn.proj.weight", "attn.to_add_out.weight"},
    {"txt_mlp.0.weight", "ff_context.linear_in.weight"},
    {"txt_mlp.2.weight", "ff_context.linear_out.weight"},
};
static const bfl_pair sgl[] = {
    {"linear1.weight", "attn.to_qkv_mlp_proj.weight"},
    {"linear2.weight", "attn.to_out.weight"},
    {"norm.query_norm.scale", "attn.norm_q.weight"},
    {"norm.key_norm.scale", "attn.norm_k.weight"},
};
static const char *const img_qkv[3] = {"transformer_blocks.%d.attn.to_q.weight",
                                       "transformer_blocks.%d.attn.to_k.weight",
                                       "transformer_blocks.%d.attn.to_v.weight"};
static const char *const txt_qkv[3] = {"transformer_blocks.%d.attn.add_q_proj.weight",
                                       "transformer_blocks.%d.attn.add_k_proj.weight",
                                       "transformer_blocks.%d.attn.add_v_proj.weight"};

int fx_bfl_map_name(const char *name, const char *src, int64_t rows, fx_bfl_target t[3]) {
    char fmt[200];
    int i;
    const char *rest;

    for (size_t k = 0; k < sizeof globals / sizeof *globals; k++)
        if (!strcmp(name, globals[k].bfl)) return one(t, src, rows, globals[k].diffusers, 0);
    if (!strcmp(name, "final_layer.adaLN_modulation.1.weight")) {
        /* BFL rows: [shift; scale]; diffusers norm_out: [scale; shift] */
        if (rows % 2) return -2;
        snprintf(t->name, sizeof t->name, "norm_out.linear.weight");
        t->ranges[0] = (fx_wset_range){src, rows / 2, rows / 2};
        t->ranges[1] = (fx_wset_range){src, 0, rows / 2};
        t->n_ranges = 2;
        return 1;
    }
    if (!strncmp(name, "guidance_in.", 12)) return -1;
    if ((rest = block_index(name, "double_blocks.", &i))) {
        if (!strcmp(rest, "img_attn.qkv.weight")) return thirds(t, src, rows, i, img_qkv);
        if (!strcmp(rest, "txt_attn.qkv.weight")) return thirds(t, src, rows, i, txt_qkv);
        for (size_t k = 0; k < sizeof dbl / sizeof *dbl; k++)
            if (!strcmp(rest, dbl[k].bfl)) {
                snprintf(fmt, sizeof fmt, "transformer_blocks.%%d.%s", dbl[k].diffusers);
                return one(t, src, rows, fmt, i);
            }
        return 0;
    }
    if ((rest = block_index(name, "single_blocks.", &i))) {
        for (size_t k = 0; k < sizeof sgl / sizeof *sgl; k++)
            if (!strcmp(rest, sgl[k].bfl)) {
                snprintf(fmt, sizeof fmt, "single_transformer_blocks.%%d.%s", sgl[k].diffusers);
                return one(t, src, rows, fmt, i);
            }
        return 0;
    }
    return 0;
}

/* The part of a block-name format after the block number. */
static const char *after_index(const char *fmt) { return strstr(fmt, "%d.") + 3; }

int fx_bfl_name_of(const char *diffusers, char *bfl, size_t size) {
    const char *rest, *hit = NULL;
    int i = 0, n;
    for (size_t k = 0; k < sizeof globals / sizeof *globals; k++)
        if (!strcmp(diffusers, globals[k].diffusers)) hit = globals[k].bfl;
    if (!strcmp(diffusers, "norm_out.linear.weight")) hit = "final_layer.adaLN_modulation.1.weight";
    if (hit) {
        n = snprintf(bfl, size, "%s", hit);
        return n > 0 && (size_t)n < size;
    }
    if ((rest = block_index(diffusers, "transformer_blocks.", &i))) {
        for (int q = 0; q < 3 && !hit; q++) {
            if (!strcmp(rest, after_index(img_qkv[q]))) hit = "img_attn.qkv.weight";
            if (!strcmp(rest, after_index(txt_qkv[q]))) hit = "txt_attn.qkv.weight";
        }
        for (size_t k = 0; k < sizeof dbl / sizeof *dbl && !hit; k++)
            if (!strcmp(rest, dbl[k].diffusers)) hit = dbl[k].bfl;
        n = hit ? snprintf(bfl, size, "double_blocks.%d.%s", i, hit) : 0;
        return n > 0 && (size_t)n < size;
    }
    if ((rest = block_index(diffusers, "single_transformer_blocks.", &i))) {
        for (size_t k = 0; k < sizeof sgl / sizeof *sgl && !hit; k++)
            if (!strcmp(rest, sgl[k].diffusers)) hit = sgl[k].bfl;
        n = hit ? snprintf(bfl, size, "single_blocks.%d.%s", i, hit) : 0;
        return n > 0 && (size_t)n < size;
    }
    return 0;
}

/* BFL names are recognised by their block and embedder names. */
static int looks_bfl(const char *name) {
    return !strncmp(name, "double_blocks.", 14) || !strncmp(name, "single_blocks.", 14) ||
           !strcmp(name, "img_in.weight") || !strncmp(name, "final_layer.", 12);
}

static int looks_diffusers(const char *name) {
    return !strncmp(name, "transformer_blocks.", 19) || !strncmp(name, "single_transformer_blocks.", 26) ||
           !strcmp(name, "x_embedder.weight") || !strcmp(name, "proj_out.weight");
}

fx_wset *fx_single_file_open(const char *path, int use_mmap, const fx_logger *log, fx_single_file_info *info,
                             fx_err *err) {
    fx_wset *base = fx_wset_open(path, path, use_mmap, err);
    return base ? fx_single_file_wrap(base, log, info, err) : NULL;
}

fx_wset *fx_single_file_wrap(fx_wset *base, const fx_logger *log, fx_single_file_info *info, fx_err *err) {
    fx_single_file_info local;
    if (!info) info = &local;
    memset(info, 0, sizeof *info);
    char path[1024];
    snprintf(path, sizeof path, "%s", fx_wset_display(base));

    const size_t plen = strlen(FX_COMFYUI_PREFIX), n = fx_wset_count(base);
    size_t bfl = 0, diffusers = 0;
    if (fx_wset_refuse_foreign(base, err)) { /* NVFP4, GPTQ, ...: named, not taken for unknown tensors */
        fx_wset_close(base);
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        if (!strncmp(fx_wset_tensor_at(base, i)->name, FX_COMFYUI_PREFIX, plen)) info->prefixed = 1;
    for (size_t i = 0; i < n; i++) {
        const char *name = fx_wset_tensor_at(base, i)->name;
        if (info->prefixed) {
            if (strncmp(name, FX_COMFYUI_PREFIX, plen)) continue;
            name += plen;
        }
        bfl += looks_bfl(name) != 0;
        diffusers += looks_diffusers(name) != 0;
    }
    if (!bfl && !diffusers) {
        fx_wset_close(base);
        fx_fail(err, FLUX_ERR_MODEL,
                "%s: not a FLUX.2 transformer checkpoint: no BFL (double_blocks.*, single_blocks.*) or diffusers "
                "(transformer_blocks.*) tensor names%s",
                path, info->prefixed ? " after the model.diffusion_model. prefix" : "");
        return NULL;
    }
    if (bfl && diffusers) {
        fx_wset_close(base);
        fx_fail(err, FLUX_ERR_MODEL, "%s: mixes BFL (%zu) and diffusers (%zu) tensor names", path, bfl, diffusers);
        return NULL;
    }
    info->layout = bfl ? FX_CKPT_BFL : FX_CKPT_DIFFUSERS;

    /* at most 3 targets per tensor (a fused qkv) */
    fx_wset *view = fx_wset_view_new(base, path, 3 * n, err);
    if (!view) return NULL;
    for (size_t i = 0; i < n; i++) {
        const fx_tensor *t = fx_wset_tensor_at(base, i);
        const char *name = t->name;
        if (info->prefixed) {
            if (strncmp(name, FX_COMFYUI_PREFIX, plen)) {
                info->ignored++;
                continue;
            }
            name += plen;
        }
        if (fx_wset_fp8_companion(name)) { /* fp8 scales: read beside their weight in the base */
            info->ignored++;
            continue;
        }
        int64_t rows = t->shape.ndim ? t->shape.d[0] : 0;
        fx_bfl_target targets[3];
        int k;
        if (info->layout == FX_CKPT_DIFFUSERS) {
            k = 1;
            snprintf(targets[0].name, sizeof targets[0].name, "%s", name);
            targets[0].ranges[0] = (fx_wset_range){t->name, 0, rows};
            targets[0].n_ranges = 1;
            if (strlen(name) >= sizeof targets[0].name || t->shape.ndim == 0) {
                info->ignored++; /* not a transformer weight */
                continue;
            }
        } else {
            k = fx_bfl_map_name(name, t->name, rows, targets);
        }
        if (k == -1) {
            info->ignored++;
            fx_log(log, 2, "flux: %s: ignoring '%s' (klein has no guidance embedder)", path, t->name);
            continue;
        }
        if (k == 0 || k == -2) {
            char shape[160];
            fx_shape_str(&t->shape, shape, sizeof shape);
            if (k == 0)
                fx_fail(err, FLUX_ERR_MODEL, "%s: tensor '%.200s' %s is not part of the FLUX.2-klein transformer (BFL layout)",
                        path, t->name, shape);
            else
                fx_fail(err, FLUX_ERR_MODEL, "%s: tensor '%.200s' %s: %lld rows cannot be split into its %s", path,
                        t->name, shape, (long long)rows,
                        strstr(name, "qkv") ? "q, k and v thirds" : "shift and scale halves");
            fx_wset_close(view); /* after the message: t and name live in it */
            return NULL;
        }
        for (int j = 0; j < k; j++)
            if (fx_wset_view_add(view, targets[j].name, targets[j].ranges, targets[j].n_ranges, err) != FLUX_OK) {
                fx_wset_close(view);
                return NULL;
            }
    }
    info->mapped = fx_wset_count(view);
    fx_log(log, 1, "flux: %s: %s single-file transformer%s, %zu tensors mapped, %zu ignored", path,
           info->layout == FX_CKPT_BFL ? "BFL" : "diffusers-named", info->prefixed ? " (ComfyUI prefix)" : "",
           info->mapped, info->ignored);
    return view;
}
