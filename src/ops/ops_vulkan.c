/*
 * ops_vulkan.c — the Vulkan backend of ops.h (VULKAN=1): storage is one
 * device buffer per fx_buf, every operation is recorded by src/vulkan and
 * runs at the next read, write or sync.
 */
#include "ops_internal.h"
#include "src/vulkan/vk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static fx_vk_mat mat(fx_view t) { return (fx_vk_mat){t.b ? t.b->dev : NULL, t.off, t.ld}; }
static fx_vk_vec vec(fx_view t) { return (fx_vk_vec){t.b ? t.b->dev : NULL, t.off}; }

static flux_status buf_alloc(fx_ops *ops, fx_buf *b, fx_err *err) {
    return fx_vk_buf_new_evicting(ops->vk, (uint64_t)b->n * 4, b->what, &b->dev, err);
}

static void buf_release(fx_ops *ops, fx_buf *b) { fx_vk_buf_free(ops->vk, b->dev); }

static flux_status write(fx_ops *ops, fx_buf *b, int64_t off, const float *src, int64_t n, fx_err *err) {
    return fx_vk_upload(ops->vk, b->dev, (uint64_t)off * 4, src, (uint64_t)n * 4, err);
}

static flux_status read(fx_ops *ops, const fx_buf *b, int64_t off, float *dst, int64_t n, fx_err *err) {
    return fx_vk_download(ops->vk, b->dev, (uint64_t)off * 4, dst, (uint64_t)n * 4, err);
}

static flux_status copy(fx_ops *ops, int64_t rows, int64_t cols, fx_view src, fx_view dst, fx_err *err) {
    return fx_vk_copy(ops->vk, rows, cols, mat(src), mat(dst), err);
}

static flux_status sync(fx_ops *ops, fx_err *err) { return fx_vk_sync(ops->vk, err); }

static flux_status weight(fx_ops *ops, const fx_conv2d_geom *g, fx_opw *w, const char *name, fx_err *err) {
    fx_vk_weight *dw = calloc(1, sizeof *dw);
    if (!dw) return fx_fail(err, FLUX_ERR_NOMEM, "out of memory (weight %s)", name);
    flux_status st = fx_vk_weight_register(ops->vk, g, &w->w, name, dw, err);
    if (st) {
        free(dw);
        return st;
    }
    w->dev = dw;
    return FLUX_OK;
}

static void weight_free(fx_ops *ops, fx_opw *w) {
    fx_vk_weight_free(ops->vk, w->dev);
    free(w->dev);
    w->dev = NULL;
}

static flux_status rope(fx_ops *ops, fx_oprope *r, fx_err *err) {
    fx_vk_rope *dr = calloc(1, sizeof *dr);
    if (!dr) return fx_fail(err, FLUX_ERR_NOMEM, "out of memory (RoPE table)");
    flux_status st = fx_vk_rope_upload(ops->vk, &r->t, dr, err);
    if (st) {
        free(dr);
        return st;
    }
    r->dev = dr;
    return FLUX_OK;
}

static void rope_free(fx_ops *ops, fx_oprope *r) {
    fx_vk_rope_free(ops->vk, r->dev);
    free(r->dev);
    r->dev = NULL;
}

static fx_vk_epilogue dev_epi(const fx_op_epi *e) {
    return (fx_vk_epilogue){.mode = e->mode, .bias = vec(e->bias), .gate = vec(e->gate)};
}

/* Adapter terms (kernels.h fx_delta) on the device: each adds its product
 * to the term's output columns with the gate g = s (store and accumulate
 * layers) or s·gate (gated layers), exactly as fx_linear on the CPU:
 *   LOWRANK  T = X·Aᵀ [m, r] (store), then Y[:, row0..] += g ⊙ (T·Bᵀ)
 *   DENSE    Y[:, row0..] += g ⊙ (X·ΔWᵀ)
 * The factors are uploaded at each call and freed after it (adapters
 * change at run time; the terms are small next to the layer): each upload
 * first runs the work recorded so far. KRON terms are refused. */
static flux_status check_terms(const fx_delta *d, fx_err *err) {
    for (; d; d = d->next)
        if (d->kind != FX_DELTA_LOWRANK && d->kind != FX_DELTA_DENSE)
            return fx_fail(err, FLUX_ERR_UNSUPPORTED,
                           "LoRA: a Kronecker (LoKr) adapter term cannot run on the Vulkan device yet; low-rank and "
                           "dense terms can (use --backend cpu for this adapter)");
    return FLUX_OK;
}

static flux_status upload_factor(fx_ops *ops, const fx_weight *f, const char *what, fx_vk_weight **out,
                                 fx_err *err) {
    fx_vk_weight *dw = calloc(1, sizeof *dw);
    if (!dw) return fx_fail(err, FLUX_ERR_NOMEM, "out of memory (LoRA %s)", what);
    flux_status st = fx_vk_weight_upload(ops->vk, f, what, dw, err);
    if (st) {
        free(dw);
        return st;
    }
    *out = dw;
    return FLUX_OK;
}

static void free_factor(fx_ops *ops, fx_vk_weight *w) {
    if (!w) return;
    fx_vk_weight_free(ops->vk, w);
    free(w);
}

static flux_status apply_term(fx_ops *ops, int64_t m, fx_vk_mat x, const fx_delta *d, fx_vk_mat y,
                              const fx_vk_epilogue *epi, fx_err *err) {
    const int gated = epi && epi->mode == FX_EPI_GATED_ACCUMULATE;
    fx_vk_weight *a = NULL, *b = NULL;
    fx_vk_buf *t = NULL, *g = NULL;
    float *host_g = NULL;
    flux_status st = FLUX_OK;
    fx_vk_epilogue e = {.mode = FX_EPI_GATED_ACCUMULATE};
    if (gated) { /* g = s·gate[row0 + j] */
        e.gate = (fx_vk_vec){epi->gate.buf, epi->gate.off + d->row0};
        e.gate_scale = d->scale;
    } else { /* g = s */
        host_g = malloc((size_t)d->rows * sizeof *host_g);
        if (!host_g) return fx_fail(err, FLUX_ERR_NOMEM, "out of memory (LoRA gate)");
        for (int64_t j = 0; j < d->rows; j++) host_g[j] = d->scale;
        st = fx_vk_buf_new(ops->vk, (uint64_t)d->rows * 4, "LoRA gate", &g, err);
        if (!st) st = fx_vk_upload(ops->vk, g, 0, host_g, (uint64_t)d->rows * 4, err);
        e.gate = (fx_vk_vec){g, 0};
    }
    const fx_vk_mat ycols = {y.buf, y.off + d->row0, y.ld};
    if (!st) st = upload_factor(ops, &d->a, d->kind == FX_DELTA_LOWRANK ? "LoRA down (A)" : "LoRA ΔW", &a, err);
    if (!st && d->kind == FX_DELTA_LOWRANK) {
        const int64_t r = d->a.n;
        st = upload_factor(ops, &d->b, "LoRA up (B)", &b, err);
        if (!st) st = fx_vk_buf_new(ops->vk, (uint64_t)m * (uint64_t)r * 4, "LoRA T = X·Aᵀ", &t, err);
        if (!st) st = fx_vk_linear(ops->vk, m, x, a, (fx_vk_mat){t, 0, r}, NULL, err);
        if (!st) st = fx_vk_linear(ops->vk, m, (fx_vk_mat){t, 0, r}, b, ycols, &e, err);
    } else if (!st) {
        st = fx_vk_linear(ops->vk, m, x, a, ycols, &e, err);
    }
    free_factor(ops, a), free_factor(ops, b); /* freed once the recorded work has run */
    fx_vk_buf_free(ops->vk, t), fx_vk_buf_free(ops->vk, g);
    free(host_g);
    return st;
}

static flux_status linear(fx_ops *ops, int64_t m, fx_view x, const fx_opw *w, fx_view y, const fx_op_epi *epi,
                          fx_err *err) {
    TRY(check_terms(w->w.delta, err)); /* never a result without the adapter */
    fx_vk_epilogue e = epi ? dev_epi(epi) : (fx_vk_epilogue){0};
    TRY(fx_vk_linear(ops->vk, m, mat(x), w->dev, mat(y), epi ? &e : NULL, err));
    for (const fx_delta *d = w->w.delta; d && m > 0; d = d->next)
        TRY(apply_term(ops, m, mat(x), d, mat(y), epi ? &e : NULL, err));
    return FLUX_OK;
}

static flux_status attention(fx_ops *ops, const fx_op_attn *a, fx_err *err) {
    fx_vk_attn_args d = {
        .sq = a->sq, .sk = a->sk, .hq = a->hq, .hkv = a->hkv, .d = a->d,
        .q = mat(a->q), .k = mat(a->k), .v = mat(a->v), .o = mat(a->o),
        .scale = a->scale, .causal = a->causal, .causal_offset = a->causal_offset,
        .key_mask = a->key_mask ? a->key_mask->dev : NULL,
    };
    return fx_vk_attention(ops->vk, &d, err);
}

static flux_status qk_norm_rope(fx_ops *ops, fx_view x, int64_t rows, int heads, int head_dim, fx_view norm_w,
                                float eps, const fx_oprope *rope, int64_t row0, fx_err *err) {
    return fx_vk_qk_norm_rope(ops->vk, mat(x), rows, heads, head_dim, vec(norm_w), eps, rope ? rope->dev : NULL, row0,
                              err);
}

static flux_status rmsnorm(fx_ops *ops, int64_t rows, int64_t cols, fx_view x, fx_view w, float eps, fx_view y,
                           fx_err *err) {
    return fx_vk_rmsnorm(ops->vk, rows, cols, mat(x), vec(w), eps, mat(y), err);
}

static flux_status layernorm_modulate(fx_ops *ops, int64_t rows, int64_t cols, fx_view x, fx_view shift,
                                      fx_view scale, float eps, fx_view y, fx_err *err) {
    return fx_vk_layernorm_modulate(ops->vk, rows, cols, mat(x), vec(shift), vec(scale), eps, mat(y), err);
}

static flux_status silu(fx_ops *ops, int64_t n, fx_view x, fx_err *err) { return fx_vk_silu(ops->vk, n, vec(x), err); }

static flux_status swiglu(fx_ops *ops, int64_t rows, int64_t cols, fx_view gate, fx_view up, fx_view out,
                          fx_err *err) {
    return fx_vk_swiglu(ops->vk, rows, cols, mat(gate), mat(up), mat(out), err);
}

static flux_status gated_add(fx_ops *ops, int64_t rows, int64_t cols, fx_view y, fx_view gate, fx_view x,
                             fx_err *err) {
    return fx_vk_gated_add(ops->vk, rows, cols, mat(y), vec(gate), mat(x), err);
}

static flux_status groupnorm(fx_ops *ops, int64_t pixels, int channels, int groups, fx_view x, fx_view gamma,
                             fx_view beta, float eps, int fuse_silu, fx_view y, fx_err *err) {
    return fx_vk_groupnorm(ops->vk, pixels, channels, groups, vec(x), vec(gamma), vec(beta), eps, fuse_silu, vec(y),
                           err);
}

static flux_status conv2d(fx_ops *ops, const fx_conv2d_geom *g, fx_view x, const fx_opw *w, const fx_op_epi *epi,
                          fx_view y, fx_err *err) {
    if (!w->dev) return fx_fail(err, FLUX_ERR_INVALID_ARG, "conv2d: the weight was not registered as a conv weight");
    fx_vk_epilogue e = epi ? dev_epi(epi) : (fx_vk_epilogue){0};
    return fx_vk_conv2d(ops->vk, g, vec(x), w->dev, epi ? &e : NULL, vec(y), err);
}

static int device_errors(const fx_ops *ops, const char **first) { return fx_vk_validation_errors(ops->vk, first); }

static void inject_lost(fx_ops *ops) { fx_vk_inject_device_lost(ops->vk); }

static void close_vk(fx_ops *ops) {
    fx_vk_close(ops->vk);
    ops->vk = NULL;
}

static const fx_ops_impl vulkan_impl = {
    .buf_alloc = buf_alloc, .buf_release = buf_release, .write = write, .read = read, .copy = copy, .sync = sync,
    .weight = weight, .weight_free = weight_free, .rope = rope, .rope_free = rope_free, .linear = linear,
    .attention = attention, .qk_norm_rope = qk_norm_rope, .rmsnorm = rmsnorm, .layernorm_modulate = layernorm_modulate,
    .silu = silu, .swiglu = swiglu, .gated_add = gated_add, .groupnorm = groupnorm, .conv2d = conv2d,
    .device_errors = device_errors, .inject_lost = inject_lost, .close = close_vk,
};

flux_status fx_ops_vulkan_open(const fx_ops_opts *o, int any_type, fx_ops *ops, fx_err *err) {
    fx_vk_opts vo;
    fx_vk_opts_init(&vo);
    vo.device = o->device >= 0 ? o->device : any_type ? FX_VK_DEVICE_ANY : FX_VK_DEVICE_AUTO;
    vo.validation = o->validation;
    vo.max_binding_bytes = o->max_binding_bytes;
    vo.weight_budget = o->weight_budget;
    vo.log = o->log;
    TRY(fx_vk_open(&vo, &ops->vk, err));
    const fx_vk_device_info *d = fx_vk_device(ops->vk);
    if (!any_type && d->type == FX_VK_DEV_CPU) { /* auto never runs on a CPU driver, even when named */
        flux_status st = fx_fail(err, FLUX_ERR_UNSUPPORTED, "Vulkan device %d (%s) is a CPU device; --backend auto skips "
                                 "it (--backend vulkan takes it)", d->index, d->name);
        fx_vk_close(ops->vk);
        ops->vk = NULL;
        return st;
    }
    snprintf(ops->name, sizeof ops->name, "vulkan: %s (%s), driver %s", d->name, fx_vk_device_type_name(d->type),
             d->driver);
    ops->impl = &vulkan_impl;
    ops->kind = FX_BACKEND_KIND_VULKAN;
    return FLUX_OK;
}

flux_status fx_ops_vulkan_list(fx_device_desc *out, int max, int *count, fx_err *err) {
    fx_vk_opts vo;
    fx_vk_opts_init(&vo);
    enum { MAXDEV = 16 };
    fx_vk_device_info info[MAXDEV];
    int n = 0;
    TRY(fx_vk_list_devices(&vo, info, MAXDEV, &n, err));
    if (n > MAXDEV) n = MAXDEV;
    for (int i = 0; i < n && i < max; i++) {
        fx_device_desc *d = &out[i];
        memset(d, 0, sizeof *d);
        d->index = info[i].index;
        d->usable = info[i].usable;
        d->memory = info[i].device_memory;
        snprintf(d->name, sizeof d->name, "%s", info[i].name);
        snprintf(d->type, sizeof d->type, "%s", fx_vk_device_type_name(info[i].type));
        snprintf(d->driver, sizeof d->driver, "%s", info[i].driver);
        snprintf(d->why_not, sizeof d->why_not, "%s", info[i].why_not);
    }
    *count = n;
    return FLUX_OK;
}
