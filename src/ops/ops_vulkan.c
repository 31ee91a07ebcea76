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

/* A registered weight: its device copy and the resident factors of its
 * adapter terms. fx_opw.dev points at `w`, the first member. */
typedef struct dev_term dev_term;
typedef struct vk_opw {
    fx_vk_weight w;
    dev_term **terms; /* [nterms], in the order of w.delta's chain; each term is its
                         own allocation, so a device weight never moves */
    int nterms;
} vk_opw;

static vk_opw *opw_of(const fx_opw *w) { return (vk_opw *)w->dev; }

static void drop_terms(fx_ops *ops, vk_opw *o);

static flux_status weight(fx_ops *ops, const fx_conv2d_geom *g, fx_opw *w, const char *name, fx_err *err) {
    vk_opw *o = calloc(1, sizeof *o);
    if (!o) return fx_fail(err, FLUX_ERR_NOMEM, "out of memory (weight %s)", name);
    flux_status st = fx_vk_weight_register(ops->vk, g, &w->w, name, &o->w, err);
    if (st) {
        free(o);
        return st;
    }
    w->dev = &o->w;
    return FLUX_OK;
}

static void weight_free(fx_ops *ops, fx_opw *w) {
    vk_opw *o = opw_of(w);
    drop_terms(ops, o);
    fx_vk_weight_free(ops->vk, &o->w);
    free(o);
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

/* ------------------------------------------------------------------------ */
/* Adapter terms (kernels.h fx_delta) on the device                         */
/* ------------------------------------------------------------------------ */

/* Each term adds its product to its output columns with the gate g = s
 * (store and accumulate layers: a shared vector of ones scaled by s in the
 * push constants) or s·gate (gated layers), exactly as fx_linear on the CPU:
 *   LOWRANK  T = X·Aᵀ [m, r] (store), then Y[:, row0..] += g ⊙ (T·Bᵀ)
 *   DENSE    Y[:, row0..] += g ⊙ (X·ΔWᵀ)
 *   KRON     the CPU's runtime form (simd/gemm/delta.c), never ΔW: per
 *            token X_t [m1, n2] (rows of x, copied when ld ≠ k),
 *            Z = X_t·W2ᵀ [m1, k2] (W2 = c·a: two GEMMs), Zᵀ (fx_vk_kron_gather),
 *            Y' = Zᵀ·W1ᵀ [k2, l], then y += g ⊙ its rows of W1⊗W2 (gather).
 *            Device memory: the factors as stored (W1, W2: l·m1 + k2·n2
 *            elements, a factored W2 r2·(k2 + n2)) plus per call at most
 *            TERM_TMP_BYTES of temporaries; materializing ΔW would cost
 *            rows·k floats per term, as much as an f32 copy of the layer.
 * The factors are uploaded once, at the first call after the terms were
 * set (fx_ops_weight_set_terms), and stay resident with the weight: the
 * scale never reaches device memory (push constants only), so a rescale
 * keeps them and no stale gate can remain; terms whose factors went away
 * are dropped at the change. Temporaries (T, the KRON chunks) and the ones
 * vector are shared by all layers (fx_ops.term_tmp, term_ones); the
 * recorder orders their reuse (barriers on every overlap). */
enum { TERM_TMP_BYTES = 32 << 20 };

struct dev_term {
    fx_delta key;            /* the host term uploaded (scale and next ignored) */
    fx_vk_weight a, b, c;    /* LOWRANK A, B; DENSE ΔW (a); KRON W2 (a; c·a when c), W1 (b) */
    int ready;
};

static int same_weight(const fx_weight *x, const fx_weight *y) {
    return x->data == y->data && x->dtype == y->dtype && x->n == y->n && x->k == y->k && x->ld == y->ld;
}

/* The same factors on the same columns (the scale may differ). */
static int same_term(const fx_delta *x, const fx_delta *y) {
    return x->kind == y->kind && x->row0 == y->row0 && x->rows == y->rows && x->kron_skip == y->kron_skip &&
           same_weight(&x->a, &y->a) && same_weight(&x->b, &y->b) && same_weight(&x->c, &y->c);
}

static void free_term(fx_ops *ops, dev_term *t) {
    if (t->a.buf) fx_vk_weight_free(ops->vk, &t->a);
    if (t->b.buf) fx_vk_weight_free(ops->vk, &t->b);
    if (t->c.buf) fx_vk_weight_free(ops->vk, &t->c);
    memset(t, 0, sizeof *t);
}

static void drop_terms(fx_ops *ops, vk_opw *o) {
    for (int i = 0; i < o->nterms; i++)
        if (o->terms[i]) free_term(ops, o->terms[i]), free(o->terms[i]);
    free(o->terms);
    o->terms = NULL;
    o->nterms = 0;
}

/* Match o's resident terms to the chain d: a term with the same factors
 * keeps its device copy (the term moves to its new place by pointer), the others are freed
 * (freed buffers live on until the work recorded with them has run). */
static flux_status sync_terms(fx_ops *ops, vk_opw *o, const fx_delta *d, fx_err *err) {
    int n = 0;
    for (const fx_delta *t = d; t; t = t->next) n++;
    dev_term **nt = n ? calloc((size_t)n, sizeof *nt) : NULL;
    if (n && !nt) {
        drop_terms(ops, o);
        return fx_fail(err, FLUX_ERR_NOMEM, "out of memory (LoRA terms)");
    }
    int i = 0;
    for (const fx_delta *t = d; t; t = t->next, i++) {
        for (int j = 0; j < o->nterms && !nt[i]; j++)
            if (o->terms[j] && o->terms[j]->ready && same_term(&o->terms[j]->key, t))
                nt[i] = o->terms[j], o->terms[j] = NULL;
        if (!nt[i] && !(nt[i] = calloc(1, sizeof *nt[i]))) {
            for (int q = 0; q < i; q++) free_term(ops, nt[q]), free(nt[q]);
            free(nt);
            drop_terms(ops, o);
            return fx_fail(err, FLUX_ERR_NOMEM, "out of memory (LoRA terms)");
        }
        nt[i]->key = *t;
        nt[i]->key.next = NULL;
    }
    drop_terms(ops, o);
    o->terms = nt;
    o->nterms = n;
    return FLUX_OK;
}

static void terms_changed(fx_ops *ops, fx_opw *w) {
    vk_opw *o = opw_of(w);
    fx_err ignored = {0};
    if (o && sync_terms(ops, o, w->w.delta, &ignored)) drop_terms(ops, o); /* uploaded again at use */
}

static flux_status upload_factor(fx_ops *ops, const fx_weight *f, const char *what, fx_vk_weight *out, fx_err *err) {
    return f->data ? fx_vk_weight_upload(ops->vk, f, what, out, err) : FLUX_OK;
}

/* The device copy of w's terms, uploading what is missing (the first call
 * after a change; a chain changed without fx_ops_weight_set_terms is
 * matched again here). */
static flux_status resident_terms(fx_ops *ops, const fx_opw *w, vk_opw *o, fx_err *err) {
    for (const fx_delta *d = w->w.delta; d; d = d->next)
        if (d->w_gate || d->row_scale)
            return fx_fail(err, FLUX_ERR_UNSUPPORTED, "DoRA adapters are not supported on the Vulkan backend (run them on the CPU)");
    int n = 0, same = 1;
    for (const fx_delta *d = w->w.delta; d; d = d->next, n++)
        if (n >= o->nterms || !same_term(&o->terms[n]->key, d)) same = 0;
    if (!same || n != o->nterms) TRY(sync_terms(ops, o, w->w.delta, err));
    for (int i = 0; i < o->nterms; i++) {
        dev_term *t = o->terms[i];
        if (t->ready) continue;
        const int lowrank = t->key.kind == FX_DELTA_LOWRANK, kron = t->key.kind == FX_DELTA_KRON;
        flux_status st = upload_factor(ops, &t->key.a, lowrank ? "LoRA down (A)" : kron ? "LoKr W2" : "LoRA ΔW", &t->a, err);
        if (!st && t->key.kind != FX_DELTA_DENSE)
            st = upload_factor(ops, &t->key.b, lowrank ? "LoRA up (B)" : "LoKr W1", &t->b, err);
        if (!st && kron) st = upload_factor(ops, &t->key.c, "LoKr W2 left factor", &t->c, err);
        if (st) {
            free_term(ops, t);
            t->key = (fx_delta){.kind = -1}; /* matches no term: tried again next call */
            return st;
        }
        t->ready = 1;
    }
    return FLUX_OK;
}

/* The shared temporaries: at least `floats` (a larger buffer replaces the
 * old one, which lives on until the work recorded with it has run). */
static flux_status term_tmp(fx_ops *ops, int64_t floats, fx_vk_buf **out, fx_err *err) {
    if (floats > ops->term_tmp_floats) {
        fx_vk_buf *b;
        TRY(fx_vk_buf_new_evicting(ops->vk, (uint64_t)floats * 4, "LoRA temporaries", &b, err));
        fx_vk_buf_free(ops->vk, ops->term_tmp);
        ops->term_tmp = b, ops->term_tmp_floats = floats;
    }
    *out = ops->term_tmp;
    return FLUX_OK;
}

/* The gate vector of a term on y's columns: s·gate[row0..] (gated layers),
 * else s·1 (the shared ones, at least `rows` of them). */
static flux_status term_gate(fx_ops *ops, const fx_delta *d, const fx_vk_epilogue *epi, fx_vk_epilogue *e,
                             fx_err *err) {
    *e = (fx_vk_epilogue){.mode = FX_EPI_GATED_ACCUMULATE, .gate_scale = d->scale};
    if (epi && epi->mode == FX_EPI_GATED_ACCUMULATE) {
        e->gate = (fx_vk_vec){epi->gate.buf, epi->gate.off + d->row0};
        return FLUX_OK;
    }
    if (d->rows > ops->term_ones_n) {
        const int64_t n = d->rows > 4096 ? d->rows : 4096;
        float *ones = malloc((size_t)n * sizeof *ones);
        if (!ones) return fx_fail(err, FLUX_ERR_NOMEM, "out of memory (LoRA gate)");
        for (int64_t j = 0; j < n; j++) ones[j] = 1.0f;
        fx_vk_buf *b;
        flux_status st = fx_vk_buf_new_evicting(ops->vk, (uint64_t)n * 4, "LoRA gate (ones)", &b, err);
        if (!st) st = fx_vk_upload(ops->vk, b, 0, ones, (uint64_t)n * 4, err);
        free(ones);
        if (st) {
            fx_vk_buf_free(ops->vk, b);
            return st;
        }
        fx_vk_buf_free(ops->vk, ops->term_ones);
        ops->term_ones = b, ops->term_ones_n = n;
    }
    e->gate = (fx_vk_vec){ops->term_ones, 0};
    return FLUX_OK;
}

static flux_status apply_kron(fx_ops *ops, int64_t m, fx_vk_mat x, const fx_delta *d, const dev_term *t,
                              fx_vk_mat y, const fx_vk_epilogue *g, fx_err *err) {
    fx_vk *vk = ops->vk;
    const int factored = d->c.data != NULL; /* W2 = c·a */
    const int64_t k2 = factored ? d->c.n : d->a.n, r2 = factored ? d->a.n : 0, n2 = d->a.k, l = d->b.n,
                  m1 = d->b.k, k = m1 * n2;
    const int copy = x.ld != k; /* the token views need rows of exactly k */
    const int64_t per_token = (copy ? k : 0) + m1 * r2 + 2 * m1 * k2 + k2 * l;
    int64_t chunk = TERM_TMP_BYTES / 4 / per_token;
    chunk = chunk < 1 ? 1 : chunk > m ? m : chunk;
    fx_vk_buf *tmp;
    TRY(term_tmp(ops, chunk * per_token, &tmp, err));
    const int64_t xc = 0, z1 = xc + (copy ? chunk * k : 0), z = z1 + chunk * m1 * r2, zt = z + chunk * m1 * k2,
                  yp = zt + chunk * m1 * k2;
    for (int64_t i0 = 0; i0 < m; i0 += chunk) {
        const int64_t c = m - i0 < chunk ? m - i0 : chunk;
        fx_vk_mat xs = {x.buf, x.off + i0 * x.ld, n2}; /* [c·m1, n2] */
        if (copy) {
            TRY(fx_vk_copy(vk, c, k, (fx_vk_mat){x.buf, x.off + i0 * x.ld, x.ld}, (fx_vk_mat){tmp, xc, k}, err));
            xs = (fx_vk_mat){tmp, xc, n2};
        }
        if (factored) { /* Z = (X·aᵀ)·cᵀ */
            TRY(fx_vk_linear(vk, c * m1, xs, &t->a, (fx_vk_mat){tmp, z1, r2}, NULL, err));
            TRY(fx_vk_linear(vk, c * m1, (fx_vk_mat){tmp, z1, r2}, &t->c, (fx_vk_mat){tmp, z, k2}, NULL, err));
        } else {
            TRY(fx_vk_linear(vk, c * m1, xs, &t->a, (fx_vk_mat){tmp, z, k2}, NULL, err));
        }
        /* Zᵀ per token [k2, m1], then Y' = Zᵀ·W1ᵀ [c·k2, l] */
        TRY(fx_vk_kron_gather(vk, c, m1 * k2, (fx_vk_vec){tmp, z}, m1 * k2, 0, m1, k2,
                              (fx_vk_mat){tmp, zt, m1 * k2}, NULL, err));
        TRY(fx_vk_linear(vk, c * k2, (fx_vk_mat){tmp, zt, m1}, &t->b, (fx_vk_mat){tmp, yp, l}, NULL, err));
        /* row o = skip + j of W1 ⊗ W2 is Y'[o mod k2, o / k2] */
        TRY(fx_vk_kron_gather(vk, c, d->rows, (fx_vk_vec){tmp, yp}, k2 * l, d->kron_skip, k2, l,
                              (fx_vk_mat){y.buf, y.off + i0 * y.ld + d->row0, y.ld}, g, err));
    }
    return FLUX_OK;
}

static flux_status apply_term(fx_ops *ops, int64_t m, fx_vk_mat x, const fx_delta *d, const dev_term *t,
                              fx_vk_mat y, const fx_vk_epilogue *epi, fx_err *err) {
    fx_vk_epilogue g;
    TRY(term_gate(ops, d, epi, &g, err));
    const fx_vk_mat ycols = {y.buf, y.off + d->row0, y.ld};
    switch (d->kind) {
    case FX_DELTA_LOWRANK: {
        const int64_t r = d->a.n;
        fx_vk_buf *tmp;
        TRY(term_tmp(ops, m * r, &tmp, err));
        TRY(fx_vk_linear(ops->vk, m, x, &t->a, (fx_vk_mat){tmp, 0, r}, NULL, err));
        return fx_vk_linear(ops->vk, m, (fx_vk_mat){tmp, 0, r}, &t->b, ycols, &g, err);
    }
    case FX_DELTA_DENSE: return fx_vk_linear(ops->vk, m, x, &t->a, ycols, &g, err);
    case FX_DELTA_KRON: return apply_kron(ops, m, x, d, t, y, &g, err);
    }
    return fx_fail(err, FLUX_ERR_INVALID_ARG, "LoRA: unknown adapter term kind %d", (int)d->kind);
}

static flux_status linear(fx_ops *ops, int64_t m, fx_view x, const fx_opw *w, fx_view y, const fx_op_epi *epi,
                          fx_err *err) {
    vk_opw *o = opw_of(w);
    if (!o) return fx_fail(err, FLUX_ERR_INVALID_ARG, "linear: the weight was not registered on the device");
    if (w->w.delta && m > 0) TRY(resident_terms(ops, w, o, err)); /* never a result without the adapter */
    fx_vk_epilogue e = epi ? dev_epi(epi) : (fx_vk_epilogue){0};
    TRY(fx_vk_linear(ops->vk, m, mat(x), w->dev, mat(y), epi ? &e : NULL, err));
    int i = 0;
    for (const fx_delta *d = w->w.delta; d && m > 0; d = d->next, i++)
        if (!fx_delta_check(d, w->w.n, w->w.k, NULL, 0)) /* refused when attached, skipped as on the CPU */
            TRY(apply_term(ops, m, mat(x), d, o->terms[i], mat(y), epi ? &e : NULL, err));
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
    fx_vk_buf_free(ops->vk, ops->term_tmp);
    fx_vk_buf_free(ops->vk, ops->term_ones);
    ops->term_tmp = ops->term_ones = NULL;
    fx_vk_close(ops->vk);
    ops->vk = NULL;
}

static const fx_ops_impl vulkan_impl = {
    .buf_alloc = buf_alloc, .buf_release = buf_release, .write = write, .read = read, .copy = copy, .sync = sync,
    .weight = weight, .weight_free = weight_free, .terms_changed = terms_changed, .rope = rope, .rope_free = rope_free, .linear = linear,
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
