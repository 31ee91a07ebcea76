/*
 * vae_whole.c — the decoder and encoder on whole tensors through the
 * backend seam (src/ops), for backends whose activations are not host
 * memory (a Vulkan device): every layer reads and writes whole
 * channels-last tensors [pixels, channels] kept on the backend, and each
 * GroupNorm computes its statistics over the stored tensor. The same
 * networks as vae_decoder.c / vae_encoder.c (BFL flux2 autoencoder.py; diffusers autoencoder_kl_flux2.py):
 *
 *   resnet     out = skip(x) + conv2(silu(GN2(conv1(silu(GN1(x))))))
 *   attention  x += (softmax(q·kᵀ/√C)·v)·W_outᵀ + b_out,  q k v = GN(x)·Wᵀ + b
 *   resample   nearest ×2 + conv 3×3 (decoder), pad right/bottom + conv 3×3
 *              stride 2 (encoder)
 *
 * Layers are put on the backend on first use and kept (vw_cache): convs
 * as conv weights (k > 1) or linear weights (1×1), biases and norm affines
 * as vectors. Memory: five tensors of the largest level (5 × 512 MiB for
 * the real decoder at 1024² in f32). The host converts between the
 * channel-major interfaces and channels-last (planar ↔ [pixels, channels]).
 */
#include "vae_whole.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Layers on the backend                                                    */
/* ------------------------------------------------------------------------ */

typedef struct vw_entry {
    const void *key;             /* the host layer (fx_weight*, or a float* vector) */
    fx_opw w;
    fx_buf *vec;
} vw_entry;

struct vw_cache {
    fx_ops *ops;
    vw_entry *e;
    int n, cap;
};

vw_cache *vw_cache_new(fx_ops *ops) {
    vw_cache *c = calloc(1, sizeof *c);
    if (c) c->ops = ops;
    return c;
}

void vw_cache_free(vw_cache *c) {
    if (!c) return;
    for (int i = 0; i < c->n; i++) {
        fx_ops_weight_free(c->ops, &c->e[i].w);
        fx_buf_free(c->ops, c->e[i].vec);
    }
    free(c->e);
    free(c);
}

static vw_entry *find(vw_cache *c, const void *key, fx_err *err) {
    for (int i = 0; i < c->n; i++)
        if (c->e[i].key == key) return &c->e[i];
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 64;
        vw_entry *p = realloc(c->e, (size_t)cap * sizeof *p);
        if (!p) {
            fx_fail(err, FLUX_ERR_NOMEM, "out of memory (VAE layers)");
            return NULL;
        }
        c->e = p, c->cap = cap;
    }
    vw_entry *e = &c->e[c->n];
    memset(e, 0, sizeof *e);
    e->key = key;
    return e;
}

/* A vector (bias, norm affine) of n floats on the backend. */
static flux_status vec_of(vw_cache *c, const float *host, int64_t n, fx_view *out, fx_err *err) {
    *out = fx_none;
    if (!host) return FLUX_OK;
    vw_entry *e = find(c, host, err);
    if (!e) return FLUX_ERR_NOMEM;
    if (!e->vec) {
        TRY(fx_ops_vector(c->ops, host, n, "VAE vector", &e->vec, err));
        c->n++;
    }
    *out = fx_vec(e->vec, 0);
    return FLUX_OK;
}

/* A linear weight (or 1×1 conv) or, with g, a k×k conv weight. */
static flux_status weight_of(vw_cache *c, const fx_weight *w, const fx_conv2d_geom *g, const fx_opw **out,
                             fx_err *err) {
    vw_entry *e = find(c, w, err);
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

typedef struct vw_run {
    flux_ctx *ctx;
    fx_ops *ops;
    fx_err *err;
    vw_cache *cache;
    const vae_model *m;
    fx_vae_observer observer;
    void *observer_user;
    fx_buf *b[VW_NBUF];          /* tensors of the largest level */
    int x, y;                    /* which of b hold the current tensor / the next one */
    int h, w;                    /* current resolution */
} vw_run;

static fx_view at(vw_run *r, int i) { return fx_vec(r->b[i], 0); }

static flux_status run_alloc(vw_run *r, int64_t floats) {
    static const char *names[VW_NBUF] = {"VAE tensor x", "VAE tensor y", "VAE normed tensor", "VAE inner tensor",
                                          "VAE attention values"};
    for (int i = 0; i < VW_NBUF; i++) TRY(fx_buf_new(r->ops, floats, names[i], &r->b[i], r->err));
    r->x = VW_X, r->y = VW_Y;
    return FLUX_OK;
}

static void run_free(vw_run *r) {
    for (int i = 0; i < VW_NBUF; i++) fx_buf_free(r->ops, r->b[i]);
}

static void swap_xy(vw_run *r) {
    int t = r->x;
    r->x = r->y, r->y = t;
}

/* Host planar [c, P] → channels-last [P, c] in b[buf] (host: P·c floats of staging). */
static flux_status put_planar(vw_run *r, const float *chw, int c, int64_t P, float *host, int buf) {
    for (int ch = 0; ch < c; ch++)
        for (int64_t i = 0; i < P; i++) host[i * c + ch] = chw[ch * P + i];
    return fx_buf_write(r->ops, r->b[buf], 0, host, P * c, r->err);
}

/* Channels [0, c) of b[buf] [P, cs] → host planar [c, P] (host: P·cs floats of staging). */
static flux_status get_planar(vw_run *r, int buf, int cs, int c, int64_t P, float *host, float *chw) {
    TRY(fx_buf_read(r->ops, r->b[buf], 0, host, P * cs, r->err));
    for (int ch = 0; ch < c; ch++)
        for (int64_t i = 0; i < P; i++) chw[ch * P + i] = host[i * cs + ch];
    return FLUX_OK;
}

/* The stage's output [h·w, c] (read back, channel-major) to the observer. */
static flux_status observe(vw_run *r, const char *name, int buf, int c) {
    if (!r->observer) return FLUX_OK;
    const int64_t hw = (int64_t)r->h * r->w;
    float *hwc = malloc(sizeof(float) * (size_t)(hw * c)), *chw = malloc(sizeof(float) * (size_t)(hw * c));
    flux_status st = !hwc || !chw ? fx_fail(r->err, FLUX_ERR_NOMEM, "out of memory (observing %s)", name)
                                  : get_planar(r, buf, c, c, hw, hwc, chw);
    if (!st) r->observer(r->observer_user, name, chw, c, r->h, r->w);
    free(hwc), free(chw);
    return st;
}

static flux_status checkpoint(vw_run *r, int sub, int subtotal) {
    TRY(fx_ops_sync(r->ops, r->err)); /* progress reports finished work */
    return r->ctx ? fx_ctx_checkpoint(r->ctx, sub, subtotal) : FLUX_OK;
}

/* dst = conv(src) + bias (epilogue mode), at the current resolution. */
static flux_status conv(vw_run *r, const vae_conv *c, int src, int dst, int stride, int up, int pad_tl, int pad_br,
                        fx_epilogue_mode mode) {
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

/* dst = GN(src) (+ SiLU) over [h·w, channels]. */
static flux_status norm(vw_run *r, const vae_norm *n, int src, int dst, int silu) {
    fx_view gamma, beta;
    TRY(vec_of(r->cache, n->gamma, n->channels, &gamma, r->err));
    TRY(vec_of(r->cache, n->beta, n->channels, &beta, r->err));
    return fx_op_groupnorm(r->ops, (int64_t)r->h * r->w, n->channels, r->m->c.norm_num_groups, at(r, src), gamma, beta,
                           r->m->c.norm_eps, silu, at(r, dst), r->err);
}

static flux_status resnet(vw_run *r, const vae_resnet *b, const char *name) {
    TRY(norm(r, &b->norm1, r->x, VW_T, 1));
    TRY(conv(r, &b->conv1, VW_T, VW_H, 1, 0, 1, 1, FX_EPI_STORE));
    TRY(norm(r, &b->norm2, VW_H, VW_T, 1));
    if (b->shortcut.w.data) {
        TRY(conv(r, &b->shortcut, r->x, r->y, 1, 0, 0, 0, FX_EPI_STORE));
    } else {
        fx_view x = {r->b[r->x], 0, b->cin}, y = {r->b[r->y], 0, b->cin};
        TRY(fx_op_copy(r->ops, (int64_t)r->h * r->w, b->cin, x, y, r->err));
    }
    TRY(conv(r, &b->conv2, VW_T, r->y, 1, 0, 1, 1, FX_EPI_ACCUMULATE)); /* out = skip + conv2(...) */
    swap_xy(r);
    return observe(r, name, r->x, b->cout);
}

/* x += attention(GN(x)): one head of dim C over every pixel. */
static flux_status attention(vw_run *r, const vae_attn *a, const char *name) {
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
    TRY(fx_op_linear(r->ops, P, q, wo, x, &eo, r->err));
    return observe(r, name, r->x, C);
}

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

static void run_begin(vw_run *r, flux_ctx *ctx, vw_cache *cache, const vae_model *m, fx_vae_observer fn, void *user) {
    memset(r, 0, sizeof *r);
    r->ctx = ctx, r->ops = ctx->ops, r->err = &ctx->err, r->cache = cache, r->m = m;
    r->observer = fn, r->observer_user = user;
}

flux_status vw_decode(flux_ctx *ctx, vw_cache *cache, const vae_model *v, fx_vae_observer fn, void *user,
                      const float *z, int h8, int w8, float *image) {
    const vae_half *d = &v->dec;
    const int L = v->c.levels, lat = v->c.latent_channels;
    const int64_t P = (int64_t)h8 * w8;
    vw_run r;
    run_begin(&r, ctx, cache, v, fn, user);
    int64_t big = largest(d, L, h8, w8, 0), outp = (int64_t)(h8 << (L - 1)) * (w8 << (L - 1)) * d->conv_out.cout;
    if (P * lat > big) big = P * lat;
    if (outp > big) big = outp;
    float *host = malloc(sizeof(float) * (size_t)(outp > P * lat ? outp : P * lat));
    flux_status st = host ? run_alloc(&r, big) : fx_fail(r.err, FLUX_ERR_NOMEM, "out of memory (VAE staging)");
    char name[96];
    if (st) goto out;
    r.h = h8, r.w = w8;
    if ((st = put_planar(&r, z, lat, P, host, r.x))) goto out;
    if (v->has_post_quant) {
        if ((st = conv(&r, &v->post_quant, r.x, r.y, 1, 0, 0, 0, FX_EPI_STORE))) goto out;
        swap_xy(&r);
        if ((st = observe(&r, "post_quant_conv", r.x, lat))) goto out;
    }
    if ((st = conv(&r, &d->conv_in, r.x, r.y, 1, 0, 1, 1, FX_EPI_STORE))) goto out;
    swap_xy(&r);
    if ((st = observe(&r, "decoder.conv_in", r.x, d->conv_in.cout))) goto out;

    if ((st = resnet(&r, &d->mid.res[0], "decoder.mid_block.resnets.0"))) goto out;
    if (d->mid.has_attn && (st = attention(&r, &d->mid.attn, "decoder.mid_block.attentions.0"))) goto out;
    if ((st = resnet(&r, &d->mid.res[1], "decoder.mid_block.resnets.1"))) goto out;
    if ((st = checkpoint(&r, 1, L + 2))) goto out; /* stages: mid block, L up blocks, output */

    for (int i = 0; i < L; i++) {
        for (int j = 0; j < d->level[i].n_res; j++) {
            snprintf(name, sizeof name, "decoder.up_blocks.%d.resnets.%d", i, j);
            if ((st = resnet(&r, &d->level[i].res[j], name))) goto out;
        }
        if (d->level[i].has_sample) {
            if ((st = conv(&r, &d->level[i].sample, r.x, r.y, 1, 1, 1, 1, FX_EPI_STORE))) goto out;
            swap_xy(&r);
            r.h *= 2, r.w *= 2;
            snprintf(name, sizeof name, "decoder.up_blocks.%d.upsamplers.0", i);
            if ((st = observe(&r, name, r.x, d->level[i].sample.cout))) goto out;
        }
        if ((st = checkpoint(&r, 2 + i, L + 2))) goto out;
    }
    /* GroupNorm → SiLU → conv_out → planar image */
    if ((st = norm(&r, &d->norm_out, r.x, VW_T, 1))) goto out;
    if ((st = conv(&r, &d->conv_out, VW_T, r.y, 1, 0, 1, 1, FX_EPI_STORE))) goto out;
    const int co = d->conv_out.cout;
    const int64_t Pi = (int64_t)r.h * r.w;
    if ((st = get_planar(&r, r.y, co, co, Pi, host, image))) goto out;
    swap_xy(&r);
    if ((st = observe(&r, "decoder.conv_out", r.x, co))) goto out;
    st = checkpoint(&r, L + 2, L + 2);
out:
    run_free(&r);
    free(host);
    return st;
}

flux_status vw_encode(flux_ctx *ctx, vw_cache *cache, const vae_model *v, fx_vae_observer fn, void *user,
                      const float *image, int height, int width, float *mean) {
    const vae_half *e = &v->enc;
    const int L = v->c.levels, lat = v->c.latent_channels, ci = e->conv_in.cin;
    const int64_t P = (int64_t)height * width;
    vw_run r;
    run_begin(&r, ctx, cache, v, fn, user);
    int64_t big = largest(e, L, height, width, 1);
    const int hl = height >> (L - 1), wl = width >> (L - 1);
    const int64_t Pl = (int64_t)hl * wl, M = e->conv_out.cout;
    if (P * ci > big) big = P * ci;
    if (Pl * M > big) big = Pl * M;
    float *host = malloc(sizeof(float) * (size_t)(P * ci > Pl * M ? P * ci : Pl * M));
    flux_status st = host ? run_alloc(&r, big) : fx_fail(r.err, FLUX_ERR_NOMEM, "out of memory (VAE staging)");
    char name[96];
    if (st) goto out;
    r.h = height, r.w = width;
    if ((st = put_planar(&r, image, ci, P, host, r.x))) goto out;
    if ((st = conv(&r, &e->conv_in, r.x, r.y, 1, 0, 1, 1, FX_EPI_STORE))) goto out;
    swap_xy(&r);
    if ((st = observe(&r, "encoder.conv_in", r.x, e->conv_in.cout))) goto out;

    for (int i = 0; i < L; i++) {
        for (int j = 0; j < e->level[i].n_res; j++) {
            snprintf(name, sizeof name, "encoder.down_blocks.%d.resnets.%d", i, j);
            if ((st = resnet(&r, &e->level[i].res[j], name))) goto out;
        }
        if (e->level[i].has_sample) { /* Downsample2D: F.pad(x, (0, 1, 0, 1)), conv stride 2 */
            if ((st = conv(&r, &e->level[i].sample, r.x, r.y, 2, 0, 0, 1, FX_EPI_STORE))) goto out;
            swap_xy(&r);
            r.h /= 2, r.w /= 2;
            snprintf(name, sizeof name, "encoder.down_blocks.%d.downsamplers.0", i);
            if ((st = observe(&r, name, r.x, e->level[i].sample.cout))) goto out;
        }
        if ((st = checkpoint(&r, 1 + i, L + 2))) goto out; /* stages: L down blocks, mid block, output */
    }
    if ((st = resnet(&r, &e->mid.res[0], "encoder.mid_block.resnets.0"))) goto out;
    if (e->mid.has_attn && (st = attention(&r, &e->mid.attn, "encoder.mid_block.attentions.0"))) goto out;
    if ((st = resnet(&r, &e->mid.res[1], "encoder.mid_block.resnets.1"))) goto out;
    if ((st = checkpoint(&r, L + 1, L + 2))) goto out;

    /* GroupNorm → SiLU → conv_out → quant_conv → mean (channels [0, lat)) */
    if ((st = norm(&r, &e->norm_out, r.x, VW_T, 1))) goto out;
    if ((st = conv(&r, &e->conv_out, VW_T, r.y, 1, 0, 1, 1, FX_EPI_STORE))) goto out;
    swap_xy(&r);
    if ((st = observe(&r, "encoder.conv_out", r.x, (int)M))) goto out;
    if (v->has_quant) {
        if ((st = conv(&r, &v->quant, r.x, r.y, 1, 0, 0, 0, FX_EPI_STORE))) goto out;
        swap_xy(&r);
        if ((st = observe(&r, "quant_conv", r.x, (int)M))) goto out;
    }
    if ((st = get_planar(&r, r.x, (int)M, lat, Pl, host, mean))) goto out;
    st = checkpoint(&r, L + 2, L + 2);
out:
    run_free(&r);
    free(host);
    return st;
}
