/*
 * vae_whole.c — the executor of the VAE network (vae_exec.h) on whole
 * tensors through the backend seam (fx_op_*), for backends whose
 * activations are not host memory (a Vulkan device): every layer reads and
 * writes whole channels-last tensors [pixels, channels] kept on the
 * backend, and each GroupNorm computes its statistics over the stored
 * tensor:
 *
 *   layer      T = GN(src) + SiLU (when normed); dst (+)= conv(T)   (1×1: fx_op_linear)
 *   attention  T = GN(x); q k v = T·Wᵀ + b; x += attention(q, k, v)·W_outᵀ + b_out
 *
 * Layers are put on the backend on first use and kept (vae_whole_cache): convs
 * as conv weights (k > 1) or linear weights (1×1), biases and norm affines
 * as vectors. Memory: five tensors of the largest level (5 × 512 MiB for
 * the real decoder at 1024² in f32). The host converts between the
 * channel-major interfaces and channels-last (planar ↔ [pixels, channels]).
 */
#include "vae_whole.h"

#include "vae_net.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Layers on the backend                                                    */
/* ------------------------------------------------------------------------ */

typedef struct vae_whole_entry {
    const void *key;             /* the host layer (fx_weight*, or a float* vector) */
    fx_opw w;
    fx_buf *vec;
} vae_whole_entry;

struct vae_whole_cache {
    fx_ops *ops;
    vae_whole_entry *e;
    int n, cap;
};

vae_whole_cache *vae_whole_cache_new(fx_ops *ops) {
    vae_whole_cache *c = calloc(1, sizeof *c);
    if (c) c->ops = ops;
    return c;
}

void vae_whole_cache_free(vae_whole_cache *c) {
    if (!c) return;
    for (int i = 0; i < c->n; i++) {
        fx_ops_weight_free(c->ops, &c->e[i].w);
        fx_buf_free(c->ops, c->e[i].vec);
    }
    free(c->e);
    free(c);
}

static vae_whole_entry *find(vae_whole_cache *c, const void *key, fx_err *err) {
    for (int i = 0; i < c->n; i++)
        if (c->e[i].key == key) return &c->e[i];
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 64;
        vae_whole_entry *p = realloc(c->e, (size_t)cap * sizeof *p);
        if (!p) {
            fx_fail(err, FLUX_ERR_NOMEM, "out of memory (VAE layers)");
            return NULL;
        }
        c->e = p, c->cap = cap;
    }
    vae_whole_entry *e = &c->e[c->n];
    memset(e, 0, sizeof *e);
    e->key = key;
    return e;
}

/* A vector (bias, norm affine) of n floats on the backend. */
static flux_status vec_of(vae_whole_cache *c, const float *host, int64_t n, fx_view *out, fx_err *err) {
    *out = fx_none;
    if (!host) return FLUX_OK;
    vae_whole_entry *e = find(c, host, err);
    if (!e) return FLUX_ERR_NOMEM;
    if (!e->vec) {
        TRY(fx_ops_vector(c->ops, host, n, "VAE vector", &e->vec, err));
        c->n++;
    }
    *out = fx_vec(e->vec, 0);
    return FLUX_OK;
}

/* A linear weight (or 1×1 conv) or, with g, a k×k conv weight. */
static flux_status weight_of(vae_whole_cache *c, const fx_weight *w, const fx_conv2d_geom *g, const fx_opw **out,
                             fx_err *err) {
    vae_whole_entry *e = find(c, w, err);
    if (!e) return FLUX_ERR_NOMEM;
    if (e->key == w && e->w.w.data) { /* registered */
        *out = &e->w;
        return FLUX_OK;
    }
    TRY(g ? fx_ops_conv_weight(c->ops, g, w, "VAE conv", &e->w, err) : fx_ops_weight(c->ops, w, "VAE linear", &e->w, err));
    c->n++;
    *out = &e->w;
    return FLUX_OK;
}

/* ------------------------------------------------------------------------ */
/* A run                                                                    */
/* ------------------------------------------------------------------------ */

enum { VW_X, VW_Y, VW_T, VW_H, VW_V, VW_NBUF };

/* VAE_X, VAE_EDGE and VAE_OUT are all the current tensor b[x] (c
 * channels); VAE_H is b[VW_H]. */
typedef struct vae_whole_run {
    vae_exec ex;                 /* first: the network's view of the run */
    flux_ctx *ctx;
    fx_ops *ops;
    fx_err *err;
    vae_whole_cache *cache;
    fx_buf *b[VW_NBUF];          /* tensors of the largest level */
    float *host;                 /* staging for the planar input and output */
    int x, y;                    /* which of b hold the current tensor / the next one */
    int skip_in_y;               /* a shortcut wrote the next residual's skip to b[y] */
    int h, w, c;                 /* current resolution and channels */
} vae_whole_run;

static fx_view at(vae_whole_run *r, int i) { return fx_vec(r->b[i], 0); }

static void swap_xy(vae_whole_run *r) {
    int t = r->x;
    r->x = r->y, r->y = t;
}

static int buf_of(const vae_whole_run *r, int slot) { return slot == VAE_H ? VW_H : r->x; }

/* Host planar [c, P] → channels-last [P, c] in b[buf]. */
static flux_status put_planar(vae_whole_run *r, const float *chw, int c, int64_t P, int buf) {
    for (int ch = 0; ch < c; ch++)
        for (int64_t i = 0; i < P; i++) r->host[i * c + ch] = chw[ch * P + i];
    return fx_buf_write(r->ops, r->b[buf], 0, r->host, P * c, r->err);
}

/* Channels [0, c) of b[buf] [P, cs] → host planar [c, P] (host: P·cs floats of staging). */
static flux_status get_planar(vae_whole_run *r, int buf, int cs, int c, int64_t P, float *host, float *chw) {
    TRY(fx_buf_read(r->ops, r->b[buf], 0, host, P * cs, r->err));
    for (int ch = 0; ch < c; ch++)
        for (int64_t i = 0; i < P; i++) chw[ch * P + i] = host[i * cs + ch];
    return FLUX_OK;
}

/* dst = GN(src) (+ SiLU) over [h·w, channels]. */
static flux_status norm(vae_whole_run *r, const vae_norm *n, int src, int dst, int silu) {
    fx_view gamma, beta;
    TRY(vec_of(r->cache, n->gamma, n->channels, &gamma, r->err));
    TRY(vec_of(r->cache, n->beta, n->channels, &beta, r->err));
    return fx_op_groupnorm(r->ops, (int64_t)r->h * r->w, n->channels, r->ex.m->c.norm_num_groups, at(r, src), gamma,
                           beta, r->ex.m->c.norm_eps, silu, at(r, dst), r->err);
}

/* dst (op)= conv(src) + bias, at the current resolution. */
static flux_status conv(vae_whole_run *r, const vae_conv *c, int src, int dst, int stride, int up, int pad_tl,
                        int pad_br, fx_epilogue_mode mode) {
    fx_conv2d_geom g = {.h = r->h, .w = r->w, .cin = c->cin, .cout = c->cout, .kh = c->k, .kw = c->k,
                        .stride = stride, .pad_top = pad_tl, .pad_left = pad_tl, .pad_bottom = pad_br,
                        .pad_right = pad_br, .upsample2x = up};
    const fx_opw *w;
    fx_op_epi epi = {mode, fx_none, fx_none};
    TRY(vec_of(r->cache, c->bias, c->cout, &epi.bias, r->err));
    if (c->k == 1 && stride == 1 && !up) { /* 1×1: a linear layer over the pixels */
        TRY(weight_of(r->cache, &c->w, NULL, &w, r->err));
        fx_view x = {r->b[src], 0, c->cin}, y = {r->b[dst], 0, c->cout};
        return fx_op_linear(r->ops, (int64_t)r->h * r->w, x, w, y, &epi, r->err);
    }
    TRY(weight_of(r->cache, &c->w, &g, &w, r->err));
    return fx_op_conv2d(r->ops, &g, at(r, src), w, &epi, at(r, dst), r->err);
}

static flux_status w_output(vae_exec *ex, int slot, int channels);

static flux_status w_conv(vae_exec *ex, const vae_layer *l) {
    vae_whole_run *r = (vae_whole_run *)ex;
    const vae_conv *c = l->conv;
    int src = buf_of(r, l->src);
    if (l->norm) {
        TRY(norm(r, l->norm, src, VW_T, 1));
        src = VW_T;
    }
    if (l->shortcut) { /* the next layer's skip, beside the current tensor */
        TRY(conv(r, l->shortcut, r->x, r->y, 1, 0, 0, 0, FX_EPI_STORE));
        r->skip_in_y = 1;
    }
    if (l->dst == VAE_H) return conv(r, c, src, VW_H, 1, 0, 1, 1, FX_EPI_STORE);
    if (l->residual) { /* dst = skip + conv(...) */
        TRY(conv(r, c, src, r->skip_in_y ? r->y : r->x, 1, 0, 1, 1, FX_EPI_ACCUMULATE));
        if (r->skip_in_y) swap_xy(r), r->skip_in_y = 0;
        r->c = c->cout;
        return FLUX_OK;
    }
    const int pad = c->k == 1 ? 0 : 1;
    if (l->resample < 0) /* Downsample2D: F.pad(x, (0, 1, 0, 1)), conv stride 2 */
        TRY(conv(r, c, src, r->y, 2, 0, 0, 1, FX_EPI_STORE));
    else
        TRY(conv(r, c, src, r->y, 1, l->resample > 0, pad, pad, FX_EPI_STORE));
    swap_xy(r);
    if (l->resample > 0) r->h *= 2, r->w *= 2;
    if (l->resample < 0) r->h /= 2, r->w /= 2;
    r->c = c->cout;
    if (l->dst == VAE_OUT) return w_output(ex, VAE_OUT, c->cout);
    return FLUX_OK;
}

/* x += attention(GN(x)): one head of dim C over every pixel. */
static flux_status w_attention(vae_exec *ex, const vae_attn *a) {
    vae_whole_run *r = (vae_whole_run *)ex;
    const int C = a->channels;
    const int64_t P = (int64_t)r->h * r->w;
    const fx_opw *wq, *wk, *wv, *wo;
    fx_op_epi eq = {FX_EPI_STORE, fx_none, fx_none}, ek = eq, ev = eq, eo = {FX_EPI_ACCUMULATE, fx_none, fx_none};
    TRY(weight_of(r->cache, &a->q, NULL, &wq, r->err));
    TRY(weight_of(r->cache, &a->k, NULL, &wk, r->err));
    TRY(weight_of(r->cache, &a->v, NULL, &wv, r->err));
    TRY(weight_of(r->cache, &a->out, NULL, &wo, r->err));
    TRY(vec_of(r->cache, a->bq, C, &eq.bias, r->err));
    TRY(vec_of(r->cache, a->bk, C, &ek.bias, r->err));
    TRY(vec_of(r->cache, a->bv, C, &ev.bias, r->err));
    TRY(vec_of(r->cache, a->bout, C, &eo.bias, r->err));
    fx_view t = {r->b[VW_T], 0, C}, q = {r->b[VW_H], 0, C}, k = {r->b[r->y], 0, C}, v = {r->b[VW_V], 0, C};
    fx_view x = {r->b[r->x], 0, C};
    TRY(norm(r, &a->norm, r->x, VW_T, 0));
    TRY(fx_op_linear(r->ops, P, t, wq, q, &eq, r->err));
    TRY(fx_op_linear(r->ops, P, t, wk, k, &ek, r->err));
    TRY(fx_op_linear(r->ops, P, t, wv, v, &ev, r->err));
    fx_op_attn args = {.sq = P, .sk = P, .hq = 1, .hkv = 1, .d = C, .q = q, .k = k, .v = v, .o = q,
                       .scale = (float)(1.0 / sqrt((double)C))};
    TRY(fx_op_attention(r->ops, &args, r->err));
    return fx_op_linear(r->ops, P, q, wo, x, &eo, r->err);
}

/* The slot's tensor [h·w, c] (GroupNorm applied when norm; read back,
 * channel-major) to the observer. */
static flux_status w_observe(vae_exec *ex, const char *name, int slot, int c, const vae_norm *nm) {
    vae_whole_run *r = (vae_whole_run *)ex;
    int buf = buf_of(r, slot);
    if (nm) {
        TRY(norm(r, nm, buf, VW_T, 0));
        buf = VW_T;
    }
    const int64_t hw = (int64_t)r->h * r->w;
    float *hwc = malloc(sizeof(float) * (size_t)(hw * c)), *chw = malloc(sizeof(float) * (size_t)(hw * c));
    flux_status st = !hwc || !chw ? fx_fail(r->err, FLUX_ERR_NOMEM, "out of memory (observing %s)", name)
                                  : get_planar(r, buf, c, c, hw, hwc, chw);
    if (!st) r->ex.observer(r->ex.observer_user, name, chw, c, r->h, r->w);
    free(hwc), free(chw);
    return st;
}

static flux_status w_output(vae_exec *ex, int slot, int channels) {
    vae_whole_run *r = (vae_whole_run *)ex;
    return get_planar(r, buf_of(r, slot), r->c, channels, (int64_t)r->h * r->w, r->host, r->ex.out);
}

static flux_status w_checkpoint(vae_exec *ex, int sub, int subtotal) {
    vae_whole_run *r = (vae_whole_run *)ex;
    TRY(fx_ops_sync(r->ops, r->err)); /* progress reports finished work */
    return r->ctx ? fx_ctx_checkpoint(r->ctx, sub, subtotal) : FLUX_OK;
}

static const vae_exec_impl whole_impl = {
    .conv = w_conv, .attention = w_attention, .observe = w_observe, .output = w_output, .checkpoint = w_checkpoint,
};

/* Floats of the largest tensor of a half: pixels × channels over its levels
 * (level i at (h0, w0) >> (down ? i : −i)). */
static int64_t largest(const vae_half *hf, int L, int h0, int w0, int down) {
    int64_t m = 0;
    for (int i = 0; i < L; i++) {
        int64_t P = down ? (int64_t)(h0 >> i) * (w0 >> i) : (int64_t)(h0 << i) * (w0 << i);
        for (int j = 0; j < hf->level[i].n_res; j++) {
            const vae_resnet *b = &hf->level[i].res[j];
            int64_t c = b->cin > b->cout ? b->cin : b->cout;
            if (P * c > m) m = P * c;
        }
        if (hf->level[i].has_sample) {
            const vae_conv *s = &hf->level[i].sample;
            int64_t Pn = down ? (int64_t)(h0 >> (i + 1)) * (w0 >> (i + 1)) : (int64_t)(h0 << (i + 1)) * (w0 << (i + 1));
            if (P * s->cin > m) m = P * s->cin;
            if (Pn * s->cout > m) m = Pn * s->cout;
        }
    }
    int64_t P0 = (int64_t)h0 * w0, P1 = down ? (int64_t)(h0 >> (L - 1)) * (w0 >> (L - 1)) : P0;
    int64_t cmid = hf->mid.res[0].cout, cin = hf->conv_in.cin > hf->conv_in.cout ? hf->conv_in.cin : hf->conv_in.cout;
    if (P1 * cmid * 1 > m) m = P1 * cmid;
    if (P0 * cin > m) m = P0 * cin;
    return m;
}

flux_status vae_whole_run_net(flux_ctx *ctx, vae_whole_cache *cache, const vae_exec *base) {
    static const char *names[VW_NBUF] = {"VAE tensor x", "VAE tensor y", "VAE normed tensor", "VAE inner tensor",
                                          "VAE attention values"};
    vae_whole_run r;
    memset(&r, 0, sizeof r);
    r.ex = *base;
    r.ex.impl = &whole_impl;
    r.ctx = ctx, r.ops = ctx->ops, r.err = &ctx->err, r.cache = cache;
    r.x = VW_X, r.y = VW_Y;
    const vae_model *v = base->m;
    const int L = v->c.levels;
    const int64_t P = (int64_t)base->in_h * base->in_w;
    int64_t big, in_floats, out_floats;
    if (base->encoder) {
        const vae_half *e = &v->enc;
        const int64_t Pl = (int64_t)(base->in_h >> (L - 1)) * (base->in_w >> (L - 1));
        big = largest(e, L, base->in_h, base->in_w, 1);
        in_floats = P * e->conv_in.cin, out_floats = Pl * e->conv_out.cout;
        r.c = e->conv_in.cin;
    } else {
        const vae_half *d = &v->dec;
        big = largest(d, L, base->in_h, base->in_w, 0);
        in_floats = P * v->c.latent_channels;
        out_floats = (int64_t)(base->in_h << (L - 1)) * (base->in_w << (L - 1)) * d->conv_out.cout;
        r.c = v->c.latent_channels;
    }
    if (in_floats > big) big = in_floats;
    if (out_floats > big) big = out_floats;
    r.host = malloc(sizeof(float) * (size_t)(out_floats > in_floats ? out_floats : in_floats));
    flux_status st = r.host ? FLUX_OK : fx_fail(r.err, FLUX_ERR_NOMEM, "out of memory (VAE staging)");
    for (int i = 0; i < VW_NBUF && !st; i++) st = fx_buf_new(r.ops, big, names[i], &r.b[i], r.err);
    r.h = base->in_h, r.w = base->in_w;
    if (!st) st = put_planar(&r, base->in, r.c, P, r.x);
    if (!st) st = base->encoder ? vae_net_encode(&r.ex) : vae_net_decode(&r.ex);
    for (int i = 0; i < VW_NBUF; i++) fx_buf_free(r.ops, r.b[i]);
    free(r.host);
    return st;
}
