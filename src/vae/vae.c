/*
 * vae.c — the VAE object: weight views (never copied; biases and norm
 * affines read to f32), the context's VAE, settings, statistics and FLOP
 * counts. The networks are in vae_decoder.c / vae_encoder.c, their blocks in
 * vae_blocks.c, the strip-streaming machinery in vae_stream.c.
 */
#include "vae_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Weights                                                                  */
/* ------------------------------------------------------------------------ */

static flux_status load_conv(fx_wset *w, const char *prefix, int cin, int cout, int k, vae_conv *c, fx_err *err) {
    char name[FX_ST_MAX_NAME];
    c->cin = cin, c->cout = cout, c->k = k;
    snprintf(name, sizeof name, "%s.weight", prefix);
    TRY(fx_wset_conv(w, name, cout, cin, k, k, &c->w, err));
    return fx_wset_vecf(w, &c->bias, cout, err, "%s.bias", prefix);
}

static flux_status load_norm(fx_wset *w, const char *prefix, int channels, vae_norm *n, fx_err *err) {
    n->channels = channels;
    TRY(fx_wset_vecf(w, &n->gamma, channels, err, "%s.weight", prefix));
    return fx_wset_vecf(w, &n->beta, channels, err, "%s.bias", prefix);
}

static flux_status load_resnet(fx_wset *w, const char *prefix, int cin, int cout, vae_resnet *r, fx_err *err) {
    char p[160];
    r->cin = cin, r->cout = cout;
    snprintf(p, sizeof p, "%s.norm1", prefix);
    TRY(load_norm(w, p, cin, &r->norm1, err));
    snprintf(p, sizeof p, "%s.conv1", prefix);
    TRY(load_conv(w, p, cin, cout, 3, &r->conv1, err));
    snprintf(p, sizeof p, "%s.norm2", prefix);
    TRY(load_norm(w, p, cout, &r->norm2, err));
    snprintf(p, sizeof p, "%s.conv2", prefix);
    TRY(load_conv(w, p, cout, cout, 3, &r->conv2, err));
    if (cin != cout) {
        snprintf(p, sizeof p, "%s.conv_shortcut", prefix);
        TRY(load_conv(w, p, cin, cout, 1, &r->shortcut, err));
    }
    return FLUX_OK;
}

static flux_status load_attn(fx_wset *w, const char *prefix, int c, vae_attn *a, fx_err *err) {
    static const char *const proj[4] = {"to_q", "to_k", "to_v", "to_out.0"};
    fx_weight *wt[4] = {&a->q, &a->k, &a->v, &a->out};
    float **bias[4] = {&a->bq, &a->bk, &a->bv, &a->bout};
    char p[160];
    a->channels = c;
    snprintf(p, sizeof p, "%s.group_norm", prefix);
    TRY(load_norm(w, p, c, &a->norm, err));
    for (int i = 0; i < 4; i++) {
        TRY(fx_wset_linearf(w, wt[i], c, c, err, "%s.%s.weight", prefix, proj[i]));
        TRY(fx_wset_vecf(w, bias[i], c, err, "%s.%s.bias", prefix, proj[i]));
    }
    return FLUX_OK;
}

static flux_status load_mid(fx_wset *w, const char *side, int c, int attn, vae_mid *m, fx_err *err) {
    char p[96];
    snprintf(p, sizeof p, "%s.mid_block.resnets.0", side);
    TRY(load_resnet(w, p, c, c, &m->res[0], err));
    if ((m->has_attn = attn)) {
        snprintf(p, sizeof p, "%s.mid_block.attentions.0", side);
        TRY(load_attn(w, p, c, &m->attn, err));
    }
    snprintf(p, sizeof p, "%s.mid_block.resnets.1", side);
    return load_resnet(w, p, c, c, &m->res[1], err);
}

/* Encoder: level i has layers_per_block resnets (enc[i−1] → enc[i] first)
 * and a stride-2 downsampler except the last. */
static flux_status load_encoder(fx_wset *w, const fx_vae_config *c, vae_half *e, fx_err *err) {
    const int L = c->levels, *ch = c->block_out_channels;
    char p[128];
    TRY(load_conv(w, "encoder.conv_in", c->in_channels, ch[0], 3, &e->conv_in, err));
    for (int i = 0; i < L; i++) {
        vae_level *lv = &e->level[i];
        lv->n_res = c->layers_per_block;
        if (!(lv->res = calloc((size_t)lv->n_res, sizeof *lv->res)))
            return fx_fail(err, FLUX_ERR_NOMEM, "out of memory (VAE encoder)");
        for (int j = 0; j < lv->n_res; j++) {
            snprintf(p, sizeof p, "encoder.down_blocks.%d.resnets.%d", i, j);
            TRY(load_resnet(w, p, j ? ch[i] : i ? ch[i - 1] : ch[0], ch[i], &lv->res[j], err));
        }
        if ((lv->has_sample = i < L - 1)) {
            snprintf(p, sizeof p, "encoder.down_blocks.%d.downsamplers.0.conv", i);
            TRY(load_conv(w, p, ch[i], ch[i], 3, &lv->sample, err));
        }
    }
    TRY(load_mid(w, "encoder", ch[L - 1], c->mid_block_add_attention, &e->mid, err));
    TRY(load_norm(w, "encoder.conv_norm_out", ch[L - 1], &e->norm_out, err));
    return load_conv(w, "encoder.conv_out", ch[L - 1], 2 * c->latent_channels, 3, &e->conv_out, err);
}

/* Decoder: channels reversed; level i has layers_per_block + 1 resnets and a
 * nearest ×2 upsampler except the last. */
static flux_status load_decoder(fx_wset *w, const fx_vae_config *c, vae_half *d, fx_err *err) {
    const int L = c->levels;
    int ch[FX_VAE_MAX_LEVELS];
    for (int i = 0; i < L; i++) ch[i] = c->decoder_block_out_channels[L - 1 - i];
    char p[128];
    TRY(load_conv(w, "decoder.conv_in", c->latent_channels, ch[0], 3, &d->conv_in, err));
    TRY(load_mid(w, "decoder", ch[0], c->mid_block_add_attention, &d->mid, err));
    for (int i = 0; i < L; i++) {
        vae_level *lv = &d->level[i];
        lv->n_res = c->layers_per_block + 1;
        if (!(lv->res = calloc((size_t)lv->n_res, sizeof *lv->res)))
            return fx_fail(err, FLUX_ERR_NOMEM, "out of memory (VAE decoder)");
        for (int j = 0; j < lv->n_res; j++) {
            snprintf(p, sizeof p, "decoder.up_blocks.%d.resnets.%d", i, j);
            TRY(load_resnet(w, p, j ? ch[i] : i ? ch[i - 1] : ch[0], ch[i], &lv->res[j], err));
        }
        if ((lv->has_sample = i < L - 1)) {
            snprintf(p, sizeof p, "decoder.up_blocks.%d.upsamplers.0.conv", i);
            TRY(load_conv(w, p, ch[i], ch[i], 3, &lv->sample, err));
        }
    }
    TRY(load_norm(w, "decoder.conv_norm_out", ch[L - 1], &d->norm_out, err));
    return load_conv(w, "decoder.conv_out", ch[L - 1], c->out_channels, 3, &d->conv_out, err);
}

static void free_conv(vae_conv *c) { free(c->bias); }
static void free_norm(vae_norm *n) { free(n->gamma), free(n->beta); }
static void free_resnet(vae_resnet *r) {
    free_norm(&r->norm1), free_norm(&r->norm2);
    free_conv(&r->conv1), free_conv(&r->conv2), free_conv(&r->shortcut);
}
static void free_half(vae_half *h, int levels) {
    free_conv(&h->conv_in), free_conv(&h->conv_out), free_norm(&h->norm_out);
    for (int i = 0; i < levels; i++) {
        if (h->level[i].res)
            for (int j = 0; j < h->level[i].n_res; j++) free_resnet(&h->level[i].res[j]);
        free(h->level[i].res);
        free_conv(&h->level[i].sample);
    }
    free_resnet(&h->mid.res[0]), free_resnet(&h->mid.res[1]);
    vae_attn *a = &h->mid.attn;
    free_norm(&a->norm);
    free(a->bq), free(a->bk), free(a->bv), free(a->bout);
}

void fx_vae_free(fx_vae *v) {
    if (!v) return;
    free_half(&v->enc, v->c.levels);
    free_half(&v->dec, v->c.levels);
    free_conv(&v->quant), free_conv(&v->post_quant);
    free(v);
}

static flux_status check_config(const fx_vae_config *c, fx_err *err) {
    if (c->levels < 1 || c->levels > FX_VAE_MAX_LEVELS)
        return fx_fail(err, FLUX_ERR_UNSUPPORTED, "vae/config.json: %d levels, expected 1..%d", c->levels,
                       FX_VAE_MAX_LEVELS);
    if (c->norm_num_groups < 1 || c->norm_num_groups > VAE_MAX_GROUPS)
        return fx_fail(err, FLUX_ERR_UNSUPPORTED, "vae/config.json: norm_num_groups %d, expected 1..%d",
                       c->norm_num_groups, VAE_MAX_GROUPS);
    for (int i = 0; i < c->levels; i++)
        if (c->block_out_channels[i] % c->norm_num_groups || c->decoder_block_out_channels[i] % c->norm_num_groups)
            return fx_fail(err, FLUX_ERR_UNSUPPORTED,
                           "vae/config.json: channels of level %d are not a multiple of norm_num_groups %d", i,
                           c->norm_num_groups);
    if (c->layers_per_block < 1)
        return fx_fail(err, FLUX_ERR_UNSUPPORTED, "vae/config.json: layers_per_block %d, expected >= 1",
                       c->layers_per_block);
    return FLUX_OK;
}

flux_status fx_vae_load(flux_ctx *ctx, fx_vae **out) {
    *out = NULL;
    if (!ctx->model || !ctx->model->vae_w) return fx_fail(&ctx->err, FLUX_ERR_STATE, "no model is loaded");
    fx_vae *v = calloc(1, sizeof *v);
    if (!v) return fx_fail(&ctx->err, FLUX_ERR_NOMEM, "out of memory (VAE)");
    v->c = ctx->model->vae;
    fx_wset *w = ctx->model->vae_w;
    const int lat = v->c.latent_channels;
    flux_status st = check_config(&v->c, &ctx->err);
    if (!st) st = load_encoder(w, &v->c, &v->enc, &ctx->err);
    if (!st) st = load_decoder(w, &v->c, &v->dec, &ctx->err);
    if (!st && (v->has_quant = v->c.use_quant_conv)) st = load_conv(w, "quant_conv", 2 * lat, 2 * lat, 1, &v->quant, &ctx->err);
    if (!st && (v->has_post_quant = v->c.use_post_quant_conv))
        st = load_conv(w, "post_quant_conv", lat, lat, 1, &v->post_quant, &ctx->err);
    if (st) {
        fx_vae_free(v);
        return st;
    }
    *out = v;
    return FLUX_OK;
}

flux_status fx_vae_get(flux_ctx *ctx, fx_vae **out) {
    if (!ctx->vae) TRY(fx_vae_load(ctx, &ctx->vae));
    *out = ctx->vae;
    return FLUX_OK;
}

void fx_vae_set_storage(fx_vae *v, fx_vae_storage s) { v->storage = s; }

void fx_vae_set_strip_pixels(fx_vae *v, int pixels) { v->strip_pixels = pixels > 0 ? pixels : 0; }

void fx_vae_set_observer(fx_vae *v, fx_vae_observer fn, void *user) {
    v->observer = fn;
    v->observer_user = user;
}

const fx_vae_stats *fx_vae_last_stats(const fx_vae *v) { return &v->stats; }

/* ------------------------------------------------------------------------ */
/* FLOP counts                                                              */
/* ------------------------------------------------------------------------ */

static double conv_flops(const vae_conv *c, double pixels) {
    return 2.0 * pixels * c->cout * (double)c->cin * c->k * c->k;
}

static double resnet_flops(const vae_resnet *r, double px) {
    double f = conv_flops(&r->conv1, px) + conv_flops(&r->conv2, px);
    return r->cin != r->cout ? f + conv_flops(&r->shortcut, px) : f;
}

static double mid_flops(const vae_mid *m, double px) {
    double f = resnet_flops(&m->res[0], px) + resnet_flops(&m->res[1], px);
    if (m->has_attn) {
        double c = m->attn.channels;
        f += 4 * 2.0 * px * c * c + 4.0 * px * px * c; /* q, k, v, out; QKᵀ and PV */
    }
    return f;
}

double fx_vae_decode_flops(const fx_vae *v, int h8, int w8) {
    double px = (double)h8 * w8, f = 0;
    const vae_half *d = &v->dec;
    if (v->has_post_quant) f += conv_flops(&v->post_quant, px);
    f += conv_flops(&d->conv_in, px) + mid_flops(&d->mid, px);
    for (int i = 0; i < v->c.levels; i++) {
        for (int j = 0; j < d->level[i].n_res; j++) f += resnet_flops(&d->level[i].res[j], px);
        if (d->level[i].has_sample) px *= 4, f += conv_flops(&d->level[i].sample, px);
    }
    return f + conv_flops(&d->conv_out, px);
}

double fx_vae_encode_flops(const fx_vae *v, int height, int width) {
    double px = (double)height * width, f = 0;
    const vae_half *e = &v->enc;
    f += conv_flops(&e->conv_in, px);
    for (int i = 0; i < v->c.levels; i++) {
        for (int j = 0; j < e->level[i].n_res; j++) f += resnet_flops(&e->level[i].res[j], px);
        if (e->level[i].has_sample) px /= 4, f += conv_flops(&e->level[i].sample, px);
    }
    f += mid_flops(&e->mid, px) + conv_flops(&e->conv_out, px);
    return v->has_quant ? f + conv_flops(&v->quant, px) : f;
}

/* ------------------------------------------------------------------------ */
/* Runs                                                                     */
/* ------------------------------------------------------------------------ */

static void run_begin(vs_run *r, flux_ctx *ctx, fx_vae *v) {
    memset(r, 0, sizeof *r);
    r->ctx = ctx;
    r->kc = &ctx->kc;
    r->v = v;
    r->groups = v->c.norm_num_groups;
    r->eps = v->c.norm_eps;
    r->strip_pixels = v->strip_pixels > 0 ? v->strip_pixels : VS_STRIP_PIXELS;
}

static flux_status run_end(vs_run *r, flux_status st, double t0, double flops) {
    fx_vae *v = r->v;
    v->stats.arena_bytes = r->arena_bytes;
    vs_arena_free(r);
    vs_run_release(r);
    v->stats.peak_bytes = r->peak_bytes;
    v->stats.seconds = fx_now_s() - t0;
    v->stats.flops = flops;
    v->stats.conv_seconds = r->conv_seconds;
    v->stats.conv_flops = r->conv_flops;
    v->stats.pack_seconds = r->pack_seconds;
    v->stats.load_seconds = r->load_seconds;
    v->stats.store_seconds = r->store_seconds;
    return st;
}

/* The largest side we accept (8× the latent side), as for images. */
#define VAE_MAX_SIDE 16384

flux_status fx_vae_decode(flux_ctx *ctx, fx_vae *v, const float *z, int h8, int w8, float *image) {
    if (!ctx || !v || !z || !image)
        return fx_fail(ctx ? &ctx->err : NULL, FLUX_ERR_INVALID_ARG, "fx_vae_decode: NULL argument");
    if (h8 < 1 || w8 < 1 || h8 > VAE_MAX_SIDE >> (v->c.levels - 1) || w8 > VAE_MAX_SIDE >> (v->c.levels - 1))
        return fx_fail(&ctx->err, FLUX_ERR_INVALID_ARG, "fx_vae_decode: latent size %dx%d out of range", h8, w8);
    vs_run r;
    run_begin(&r, ctx, v);
    double t0 = fx_now_s();
    flux_status st = vs_run_init(&r);
    if (!st) st = vd_decode(&r, z, h8, w8, image);
    return run_end(&r, st, t0, fx_vae_decode_flops(v, h8, w8));
}

flux_status fx_vae_encode(flux_ctx *ctx, fx_vae *v, const float *image, int height, int width, float *mean) {
    if (!ctx || !v || !image || !mean)
        return fx_fail(ctx ? &ctx->err : NULL, FLUX_ERR_INVALID_ARG, "fx_vae_encode: NULL argument");
    const int f = 1 << (v->c.levels - 1);
    if (height < f || width < f || height % f || width % f || height > VAE_MAX_SIDE || width > VAE_MAX_SIDE)
        return fx_fail(&ctx->err, FLUX_ERR_INVALID_ARG,
                       "fx_vae_encode: image size %dx%d must be a positive multiple of %d, at most %d", height,
                       width, f, VAE_MAX_SIDE);
    vs_run r;
    run_begin(&r, ctx, v);
    double t0 = fx_now_s();
    flux_status st = vs_run_init(&r);
    if (!st) st = ve_encode(&r, image, height, width, mean);
    return run_end(&r, st, t0, fx_vae_encode_flops(v, height, width));
}
