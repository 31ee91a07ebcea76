/*
 * ops_vulkan.c — the Vulkan backend of ops.h (VULKAN=1): storage is one
 * device buffer per fx_buf (its state: an fx_vk_buf), every operation is
 * recorded by src/vulkan and runs at the next read, write or sync. A
 * weight's state is its device copy with its adapter terms' factors
 * (vk_opw), a RoPE table's its fx_vk_rope.
 */
#include "ops_internal.h"
#include "src/vulkan/vk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The backend's context: the device and what all layers share. */
typedef struct vk_ctx {
    fx_vk *vk;
    fx_vk_buf *term_tmp;        /* adapter terms' temporaries, shared (grown) */
    fx_vk_buf *term_ones;       /* [term_ones_n] ones, the gate of ungated layers */
    int64_t term_tmp_floats, term_ones_n;
    char name[640];             /* "vulkan: <device> (<type>), driver <driver>" */
} vk_ctx;

static fx_vk_buf *dev_buf(const fx_buf *b) { return b ? b->state : NULL; }
static fx_vk_mat mat(fx_view t) { return (fx_vk_mat){dev_buf(t.b), t.off, t.ld}; }
static fx_vk_vec vec(fx_view t) { return (fx_vk_vec){dev_buf(t.b), t.off}; }

static flux_status buf_alloc(void *ctx, fx_buf *b, fx_err *err) {
    vk_ctx *vc = ctx;
    fx_vk_buf *d;
    TRY(fx_vk_buf_new_evicting(vc->vk, (uint64_t)b->n * 4, b->what, &d, err));
    b->state = d;
    return FLUX_OK;
}

static void buf_free(void *ctx, fx_buf *b) {
    vk_ctx *vc = ctx;
    fx_vk_buf_free(vc->vk, b->state);
    b->state = NULL;
}

static flux_status write(void *ctx, fx_buf *b, int64_t off, const float *src, int64_t n, fx_err *err) {
    vk_ctx *vc = ctx;
    return fx_vk_upload(vc->vk, b->state, (uint64_t)off * 4, src, (uint64_t)n * 4, err);
}

static flux_status read(void *ctx, const fx_buf *b, int64_t off, float *dst, int64_t n, fx_err *err) {
    vk_ctx *vc = ctx;
    return fx_vk_download(vc->vk, b->state, (uint64_t)off * 4, dst, (uint64_t)n * 4, err);
}

static flux_status copy(void *ctx, int64_t rows, int64_t cols, fx_view src, fx_view dst, fx_err *err) {
    vk_ctx *vc = ctx;
    return fx_vk_copy(vc->vk, rows, cols, mat(src), mat(dst), err);
}

static flux_status sync(void *ctx, fx_err *err) {
    vk_ctx *vc = ctx;
    return fx_vk_sync(vc->vk, err);
}

/* A registered weight (fx_opw.state): its device copy and the resident
 * factors of its adapter terms. */
typedef struct dev_term dev_term;
typedef struct vk_opw {
    fx_vk_weight w;
    dev_term **terms; /* [nterms], in the order of w.delta's chain; each term is its
                         own allocation, so a device weight never moves */
    int nterms;
} vk_opw;

static vk_opw *opw_of(const fx_opw *w) { return w->state; }

static void drop_terms(vk_ctx *vc, vk_opw *o);

static flux_status weight_prepare(void *ctx, const fx_conv2d_geom *g, fx_opw *w, const char *name, fx_err *err) {
    vk_ctx *vc = ctx;
    vk_opw *o = calloc(1, sizeof *o);
    if (!o) return fx_fail(err, FLUX_ERR_NOMEM, "out of memory (weight %s)", name);
    flux_status st = fx_vk_weight_register(vc->vk, g, &w->w, name, &o->w, err);
    if (st) {
        free(o);
        return st;
    }
    w->state = o;
    return FLUX_OK;
}

static void weight_release(void *ctx, fx_opw *w) {
    vk_ctx *vc = ctx;
    vk_opw *o = opw_of(w);
    if (!o) return;
    drop_terms(vc, o);
    fx_vk_weight_free(vc->vk, &o->w);
    free(o);
    w->state = NULL;
}

static flux_status rope_prepare(void *ctx, fx_oprope *r, fx_err *err) {
    vk_ctx *vc = ctx;
    fx_vk_rope *dr = calloc(1, sizeof *dr);
    if (!dr) return fx_fail(err, FLUX_ERR_NOMEM, "out of memory (RoPE table)");
    flux_status st = fx_vk_rope_upload(vc->vk, &r->t, dr, err);
    if (st) {
        free(dr);
        return st;
    }
    r->state = dr;
    return FLUX_OK;
}

static void rope_release(void *ctx, fx_oprope *r) {
    vk_ctx *vc = ctx;
    if (!r->state) return;
    fx_vk_rope_free(vc->vk, r->state);
    free(r->state);
    r->state = NULL;
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
 * vector are shared by all layers (vk_ctx.term_tmp, term_ones); the
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

static void free_term(vk_ctx *vc, dev_term *t) {
    if (t->a.buf) fx_vk_weight_free(vc->vk, &t->a);
    if (t->b.buf) fx_vk_weight_free(vc->vk, &t->b);
    if (t->c.buf) fx_vk_weight_free(vc->vk, &t->c);
    memset(t, 0, sizeof *t);
}

static void drop_terms(vk_ctx *vc, vk_opw *o) {
    for (int i = 0; i < o->nterms; i++)
        if (o->terms[i]) free_term(vc, o->terms[i]), free(o->terms[i]);
    free(o->terms);
    o->terms = NULL;
    o->nterms = 0;
}

/* Match o's resident terms to the chain d: a term with the same factors
 * keeps its device copy (the term moves to its new place by pointer), the others are freed
 * (freed buffers live on until the work recorded with them has run). */
static flux_status sync_terms(vk_ctx *vc, vk_opw *o, const fx_delta *d, fx_err *err) {
    int n = 0;
    for (const fx_delta *t = d; t; t = t->next) n++;
    dev_term **nt = n ? calloc((size_t)n, sizeof *nt) : NULL;
    if (n && !nt) {
        drop_terms(vc, o);
        return fx_fail(err, FLUX_ERR_NOMEM, "out of memory (LoRA terms)");
    }
    int i = 0;
    for (const fx_delta *t = d; t; t = t->next, i++) {
        for (int j = 0; j < o->nterms && !nt[i]; j++)
            if (o->terms[j] && o->terms[j]->ready && same_term(&o->terms[j]->key, t))
                nt[i] = o->terms[j], o->terms[j] = NULL;
        if (!nt[i] && !(nt[i] = calloc(1, sizeof *nt[i]))) {
            for (int q = 0; q < i; q++) free_term(vc, nt[q]), free(nt[q]);
            free(nt);
            drop_terms(vc, o);
            return fx_fail(err, FLUX_ERR_NOMEM, "out of memory (LoRA terms)");
        }
        nt[i]->key = *t;
        nt[i]->key.next = NULL;
    }
    drop_terms(vc, o);
    o->terms = nt;
    o->nterms = n;
    return FLUX_OK;
}

static void weight_terms(void *ctx, fx_opw *w) {
    vk_ctx *vc = ctx;
    vk_opw *o = opw_of(w);
    fx_err ignored = {0};
    if (o && sync_terms(vc, o, w->w.delta, &ignored)) drop_terms(vc, o); /* uploaded again at use */
}

static flux_status upload_factor(vk_ctx *vc, const fx_weight *f, const char *what, fx_vk_weight *out, fx_err *err) {
    return f->data ? fx_vk_weight_upload(vc->vk, f, what, out, err) : FLUX_OK;
}

/* The device copy of w's terms, uploading what is missing (the first call
 * after a change; a chain changed without fx_ops_weight_set_terms is
 * matched again here). */
static flux_status resident_terms(vk_ctx *vc, const fx_opw *w, vk_opw *o, fx_err *err) {
    for (const fx_delta *d = w->w.delta; d; d = d->next)
        if (d->w_gate || d->row_scale)
            return fx_fail(err, FLUX_ERR_UNSUPPORTED, "DoRA adapters are not supported on the Vulkan backend (run them on the CPU)");
    int n = 0, same = 1;
    for (const fx_delta *d = w->w.delta; d; d = d->next, n++)
        if (n >= o->nterms || !same_term(&o->terms[n]->key, d)) same = 0;
    if (!same || n != o->nterms) TRY(sync_terms(vc, o, w->w.delta, err));
    for (int i = 0; i < o->nterms; i++) {
        dev_term *t = o->terms[i];
        if (t->ready) continue;
        const int lowrank = t->key.kind == FX_DELTA_LOWRANK, kron = t->key.kind == FX_DELTA_KRON;
        flux_status st = upload_factor(vc, &t->key.a, lowrank ? "LoRA down (A)" : kron ? "LoKr W2" : "LoRA ΔW", &t->a, err);
        if (!st && t->key.kind != FX_DELTA_DENSE)
            st = upload_factor(vc, &t->key.b, lowrank ? "LoRA up (B)" : "LoKr W1", &t->b, err);
        if (!st && kron) st = upload_factor(vc, &t->key.c, "LoKr W2 left factor", &t->c, err);
        if (st) {
            free_term(vc, t);
            t->key = (fx_delta){.kind = -1}; /* matches no term: tried again next call */
            return st;
        }
        t->ready = 1;
    }
    return FLUX_OK;
}

/* The shared temporaries: at least `floats` (a larger buffer replaces the
 * old one, which lives on until the work recorded with it has run). */
static flux_status term_tmp(vk_ctx *vc, int64_t floats, fx_vk_buf **out, fx_err *err) {
    if (floats > vc->term_tmp_floats) {
        fx_vk_buf *b;
        TRY(fx_vk_buf_new_evicting(vc->vk, (uint64_t)floats * 4, "LoRA temporaries", &b, err));
        fx_vk_buf_free(vc->vk, vc->term_tmp);
        vc->term_tmp = b, vc->term_tmp_floats = floats;
    }
    *out = vc->term_tmp;
    return FLUX_OK;
}

/* The gate vector of a term on y's columns: s·gate[row0..] (gated layers),
 * else s·1 (the shared ones, at least `rows` of them). */
static flux_status term_gate(vk_ctx *vc, const fx_delta *d, const fx_vk_epilogue *epi, fx_vk_epilogue *e,
                             fx_err *err) {
    *e = (fx_vk_epilogue){.mode = FX_EPI_GATED_ACCUMULATE, .gate_scale = d->scale};
    if (epi && epi->mode == FX_EPI_GATED_ACCUMULATE) {
        e->gate = (fx_vk_vec){epi->gate.buf, epi->gate.off + d->row0};
        return FLUX_OK;
    }
    if (d->rows > vc->term_ones_n) {
        const int64_t n = d->rows > 4096 ? d->rows : 4096;
        float *ones = malloc((size_t)n * sizeof *ones);
        if (!ones) return fx_fail(err, FLUX_ERR_NOMEM, "out of memory (LoRA gate)");
        for (int64_t j = 0; j < n; j++) ones[j] = 1.0f;
        fx_vk_buf *b;
        flux_status st = fx_vk_buf_new_evicting(vc->vk, (uint64_t)n * 4, "LoRA gate (ones)", &b, err);
        if (!st) st = fx_vk_upload(vc->vk, b, 0, ones, (uint64_t)n * 4, err);
        free(ones);
        if (st) {
            fx_vk_buf_free(vc->vk, b);
            return st;
        }
        fx_vk_buf_free(vc->vk, vc->term_ones);
        vc->term_ones = b, vc->term_ones_n = n;
    }
    e->gate = (fx_vk_vec){vc->term_ones, 0};
    return FLUX_OK;
}

static flux_status apply_kron(vk_ctx *vc, int64_t m, fx_vk_mat x, const fx_delta *d, const dev_term *t,
                              fx_vk_mat y, const fx_vk_epilogue *g, fx_err *err) {
    fx_vk *vk = vc->vk;
    const int factored = d->c.data != NULL; /* W2 = c·a */
    const int64_t k2 = factored ? d->c.n : d->a.n, r2 = factored ? d->a.n : 0, n2 = d->a.k, l = d->b.n,
                  m1 = d->b.k, k = m1 * n2;
    const int copy = x.ld != k; /* the token views need rows of exactly k */
    const int64_t per_token = (copy ? k : 0) + m1 * r2 + 2 * m1 * k2 + k2 * l;
    int64_t chunk = TERM_TMP_BYTES / 4 / per_token;
    chunk = chunk < 1 ? 1 : chunk > m ? m : chunk;
    fx_vk_buf *tmp;
    TRY(term_tmp(vc, chunk * per_token, &tmp, err));
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

static flux_status apply_term(vk_ctx *vc, int64_t m, fx_vk_mat x, const fx_delta *d, const dev_term *t,
                              fx_vk_mat y, const fx_vk_epilogue *epi, fx_err *err) {
    fx_vk_epilogue g;
    TRY(term_gate(vc, d, epi, &g, err));
    const fx_vk_mat ycols = {y.buf, y.off + d->row0, y.ld};
    switch (d->kind) {
    case FX_DELTA_LOWRANK: {
        const int64_t r = d->a.n;
        fx_vk_buf *tmp;
        TRY(term_tmp(vc, m * r, &tmp, err));
        TRY(fx_vk_linear(vc->vk, m, x, &t->a, (fx_vk_mat){tmp, 0, r}, NULL, err));
        return fx_vk_linear(vc->vk, m, (fx_vk_mat){tmp, 0, r}, &t->b, ycols, &g, err);
    }
    case FX_DELTA_DENSE: return fx_vk_linear(vc->vk, m, x, &t->a, ycols, &g, err);
    case FX_DELTA_KRON: return apply_kron(vc, m, x, d, t, y, &g, err);
    }
    return fx_fail(err, FLUX_ERR_INVALID_ARG, "LoRA: unknown adapter term kind %d", (int)d->kind);
}

static flux_status linear(void *ctx, int64_t m, fx_view x, const fx_opw *w, fx_view y, const fx_op_epi *epi,
                          fx_err *err) {
    vk_ctx *vc = ctx;
    vk_opw *o = opw_of(w);
    if (!o) return fx_fail(err, FLUX_ERR_INVALID_ARG, "linear: the weight was not registered on the device");
    if (w->w.delta && m > 0) TRY(resident_terms(vc, w, o, err)); /* never a result without the adapter */
    fx_vk_epilogue e = epi ? dev_epi(epi) : (fx_vk_epilogue){0};
    TRY(fx_vk_linear(vc->vk, m, mat(x), &o->w, mat(y), epi ? &e : NULL, err));
    int i = 0;
    for (const fx_delta *d = w->w.delta; d && m > 0; d = d->next, i++)
        if (!fx_delta_check(d, w->w.n, w->w.k, NULL, 0)) /* refused when attached, skipped as on the CPU */
            TRY(apply_term(vc, m, mat(x), d, o->terms[i], mat(y), epi ? &e : NULL, err));
    return FLUX_OK;
}

static flux_status attention(void *ctx, const fx_op_attn *a, fx_err *err) {
    vk_ctx *vc = ctx;
    fx_vk_attn_args d = {
        .sq = a->sq, .sk = a->sk, .hq = a->hq, .hkv = a->hkv, .d = a->d,
        .q = mat(a->q), .k = mat(a->k), .v = mat(a->v), .o = mat(a->o),
        .scale = a->scale, .causal = a->causal, .causal_offset = a->causal_offset,
        .key_mask = dev_buf(a->key_mask),
    };
    return fx_vk_attention(vc->vk, &d, err);
}

static flux_status qk_norm_rope(void *ctx, fx_view x, int64_t rows, int heads, int head_dim, fx_view norm_w,
                                float eps, const fx_oprope *rope, int64_t row0, fx_err *err) {
    vk_ctx *vc = ctx;
    return fx_vk_qk_norm_rope(vc->vk, mat(x), rows, heads, head_dim, vec(norm_w), eps, rope ? rope->state : NULL, row0,
                              err);
}

static flux_status rmsnorm(void *ctx, int64_t rows, int64_t cols, fx_view x, fx_view w, float eps, fx_view y,
                           fx_err *err) {
    vk_ctx *vc = ctx;
    return fx_vk_rmsnorm(vc->vk, rows, cols, mat(x), vec(w), eps, mat(y), err);
}

static flux_status layernorm_modulate(void *ctx, int64_t rows, int64_t cols, fx_view x, fx_view shift,
                                      fx_view scale, float eps, fx_view y, fx_err *err) {
    vk_ctx *vc = ctx;
    return fx_vk_layernorm_modulate(vc->vk, rows, cols, mat(x), vec(shift), vec(scale), eps, mat(y), err);
}

static flux_status silu(void *ctx, int64_t n, fx_view x, fx_err *err) {
    vk_ctx *vc = ctx;
    return fx_vk_silu(vc->vk, n, vec(x), err);
}

static flux_status swiglu(void *ctx, int64_t rows, int64_t cols, fx_view gate, fx_view up, fx_view out,
                          fx_err *err) {
    vk_ctx *vc = ctx;
    return fx_vk_swiglu(vc->vk, rows, cols, mat(gate), mat(up), mat(out), err);
}

static flux_status gated_add(void *ctx, int64_t rows, int64_t cols, fx_view y, fx_view gate, fx_view x,
                             fx_err *err) {
    vk_ctx *vc = ctx;
    return fx_vk_gated_add(vc->vk, rows, cols, mat(y), vec(gate), mat(x), err);
}

static flux_status groupnorm(void *ctx, int64_t pixels, int channels, int groups, fx_view x, fx_view gamma,
                             fx_view beta, float eps, int fuse_silu, fx_view y, fx_err *err) {
    vk_ctx *vc = ctx;
    return fx_vk_groupnorm(vc->vk, pixels, channels, groups, vec(x), vec(gamma), vec(beta), eps, fuse_silu, vec(y),
                           err);
}

static flux_status conv2d(void *ctx, const fx_conv2d_geom *g, fx_view x, const fx_opw *w, const fx_op_epi *epi,
                          fx_view y, fx_err *err) {
    vk_ctx *vc = ctx;
    const vk_opw *o = opw_of(w);
    if (!o) return fx_fail(err, FLUX_ERR_INVALID_ARG, "conv2d: the weight was not registered as a conv weight");
    fx_vk_epilogue e = epi ? dev_epi(epi) : (fx_vk_epilogue){0};
    return fx_vk_conv2d(vc->vk, g, vec(x), &o->w, epi ? &e : NULL, vec(y), err);
}

static int device_errors(const void *ctx, const char **first) {
    const vk_ctx *vc = ctx;
    return fx_vk_validation_errors(vc->vk, first);
}

static void inject_device_lost(void *ctx) {
    vk_ctx *vc = ctx;
    fx_vk_inject_device_lost(vc->vk);
}

static void close_vk(void *ctx) {
    vk_ctx *vc = ctx;
    fx_vk_buf_free(vc->vk, vc->term_tmp);
    fx_vk_buf_free(vc->vk, vc->term_ones);
    fx_vk_close(vc->vk);
    free(vc);
}

static const char *describe(const void *ctx) { return ((const vk_ctx *)ctx)->name; }

static flux_status open_vk(const fx_ops_opts *o, const fx_kctx *kc, int unasked, void **ctx, fx_err *err) {
    (void)kc;
    fx_vk_opts vo;
    fx_vk_opts_init(&vo);
    vo.device = o->device >= 0 ? o->device : unasked ? FX_VK_DEVICE_AUTO : FX_VK_DEVICE_ANY;
    vo.validation = o->validation;
    vo.max_binding_bytes = o->max_binding_bytes;
    vo.weight_budget = o->weight_budget;
    vo.log = o->log;
    vk_ctx *vc = calloc(1, sizeof *vc);
    if (!vc) return fx_fail(err, FLUX_ERR_NOMEM, "out of memory (Vulkan backend)");
    flux_status st = fx_vk_open(&vo, &vc->vk, err);
    if (st) {
        free(vc);
        return st;
    }
    const fx_vk_device_info *d = fx_vk_device(vc->vk);
    if (unasked && d->type == FX_VK_DEV_CPU) { /* auto never runs on a CPU driver, even when named */
        st = fx_fail(err, FLUX_ERR_UNSUPPORTED, "Vulkan device %d (%s) is a CPU device; --backend auto skips "
                     "it (--backend vulkan takes it)", d->index, d->name);
        fx_vk_close(vc->vk);
        free(vc);
        return st;
    }
    snprintf(vc->name, sizeof vc->name, "vulkan: %s (%s), driver %s", d->name, fx_vk_device_type_name(d->type),
             d->driver);
    *ctx = vc;
    return FLUX_OK;
}

static flux_status list_vk(fx_device_desc *out, int max, int *count, fx_err *err) {
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

const fx_backend fx_backend_vulkan = {
    .name = "vulkan", .title = "Vulkan", .open = open_vk, .close = close_vk, .describe = describe,
    .list_devices = list_vk,
    .buf_alloc = buf_alloc, .buf_free = buf_free, .write = write, .read = read, .copy = copy, .sync = sync,
    .weight_prepare = weight_prepare, .weight_release = weight_release, .weight_terms = weight_terms,
    .rope_prepare = rope_prepare, .rope_release = rope_release,
    .linear = linear, .attention = attention, .qk_norm_rope = qk_norm_rope, .rmsnorm = rmsnorm,
    .layernorm_modulate = layernorm_modulate, .silu = silu, .swiglu = swiglu, .gated_add = gated_add,
    .groupnorm = groupnorm, .conv2d = conv2d,
    .device_errors = device_errors, .inject_device_lost = inject_device_lost,
};
