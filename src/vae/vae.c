/*
 * vae.c — the VAE face (vae.h): the context's VAE built from the model's
 * weights (vae_weights.c), its settings and statistics, and each decode or
 * encode as one run of the network (vae_net.c) on an executor: the
 * strip-streaming one (vae_stream.h) when the backend's tensors are host
 * memory, else the whole-tensor one over the backend (vae_whole.c).
 */
#include "vae.h"

#include "src/base/clock.h"
#include "src/model/model.h"
#include "vae_stream.h"
#include "vae_whole.h"

#include <stdlib.h>
#include <string.h>

struct fx_vae {
    vae_model m;
    fx_vae_observer observer;
    void *observer_user;
    fx_vae_storage storage;
    int strip_pixels;
    int whole;                   /* 1: whole tensors even on the CPU backend (tests) */
    vae_whole_cache *dev;               /* layers on the backend (whole-tensor runs) */
    fx_vae_stats stats;
};

void fx_vae_free(fx_vae *v) {
    if (!v) return;
    vae_whole_cache_free(v->dev);
    vae_model_free(&v->m);
    free(v);
}

flux_status fx_vae_load(flux_ctx *ctx, fx_vae **out) {
    *out = NULL;
    if (!ctx->model || !ctx->model->vae_w) return fx_fail(&ctx->err, FLUX_ERR_STATE, "no model is loaded");
    fx_vae *v = calloc(1, sizeof *v);
    if (!v) return fx_fail(&ctx->err, FLUX_ERR_NOMEM, "out of memory (VAE)");
    flux_status st = vae_model_load(ctx->model->vae_w, &ctx->model->vae, &v->m, &ctx->err);
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

void fx_vae_set_whole_tensors(fx_vae *v, int on) { v->whole = on; }

/* The whole-tensor plan: on backends whose tensors are not host memory, or when asked. */
static int run_whole(flux_ctx *ctx, fx_vae *v, fx_err *err) {
    if (!v->whole && fx_ops_on_host(ctx->ops)) return 0;
    if (!v->dev && !(v->dev = vae_whole_cache_new(ctx->ops))) {
        fx_fail(err, FLUX_ERR_NOMEM, "out of memory (VAE layers)");
        return -1;
    }
    return 1;
}

void fx_vae_set_strip_pixels(fx_vae *v, int pixels) { v->strip_pixels = pixels > 0 ? pixels : 0; }

void fx_vae_set_observer(fx_vae *v, fx_vae_observer fn, void *user) {
    v->observer = fn;
    v->observer_user = user;
}

const fx_vae_stats *fx_vae_last_stats(const fx_vae *v) { return &v->stats; }

struct vae_model *fx_vae_layers(fx_vae *v) { return &v->m; }

double fx_vae_decode_flops(const fx_vae *v, int h8, int w8) { return vae_model_decode_flops(&v->m, h8, w8); }

double fx_vae_encode_flops(const fx_vae *v, int height, int width) {
    return vae_model_encode_flops(&v->m, height, width);
}

/* ------------------------------------------------------------------------ */
/* Runs                                                                     */
/* ------------------------------------------------------------------------ */

/* The network's view of a run: model, input, output, observer. */
static vae_exec exec_of(const fx_vae *v, int encoder, const float *in, int h, int w, float *out) {
    vae_exec ex = {.m = &v->m, .encoder = encoder, .in = in, .in_h = h, .in_w = w, .out = out,
                   .observer = v->observer, .observer_user = v->observer_user};
    return ex;
}

static void run_begin(vae_stream *r, flux_ctx *ctx, const fx_vae *v, const vae_exec *ex) {
    memset(r, 0, sizeof *r);
    r->ex = *ex;
    r->ctx = ctx;
    r->err = &ctx->err;
    r->ops = ctx->ops;
    r->force_f32 = ctx->force_f32;
    r->storage = v->storage;
    r->groups = v->m.c.norm_num_groups;
    r->eps = v->m.c.norm_eps;
    r->strip_pixels = v->strip_pixels > 0 ? v->strip_pixels : VAE_STRIP_PIXELS;
}

static flux_status run_end(vae_stream *r, fx_vae *v, flux_status st, double t0, double flops) {
    v->stats.arena_bytes = r->arena_bytes;
    vae_arena_free(r);
    vae_stream_release(r);
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
    if (h8 < 1 || w8 < 1 || h8 > VAE_MAX_SIDE >> (v->m.c.levels - 1) || w8 > VAE_MAX_SIDE >> (v->m.c.levels - 1))
        return fx_fail(&ctx->err, FLUX_ERR_INVALID_ARG, "fx_vae_decode: latent size %dx%d out of range", h8, w8);
    int whole = run_whole(ctx, v, &ctx->err);
    if (whole < 0) return ctx->err.code;
    const vae_exec ex = exec_of(v, 0, z, h8, w8, image);
    if (whole) return vae_whole_run_net(ctx, v->dev, &ex);
    vae_stream r;
    run_begin(&r, ctx, v, &ex);
    double t0 = fx_now_s();
    flux_status st = vae_stream_init(&r);
    if (!st) st = vae_stream_run(&r);
    return run_end(&r, v, st, t0, fx_vae_decode_flops(v, h8, w8));
}

flux_status fx_vae_encode(flux_ctx *ctx, fx_vae *v, const float *image, int height, int width, float *mean) {
    if (!ctx || !v || !image || !mean)
        return fx_fail(ctx ? &ctx->err : NULL, FLUX_ERR_INVALID_ARG, "fx_vae_encode: NULL argument");
    const int f = 1 << (v->m.c.levels - 1);
    if (height < f || width < f || height % f || width % f || height > VAE_MAX_SIDE || width > VAE_MAX_SIDE)
        return fx_fail(&ctx->err, FLUX_ERR_INVALID_ARG,
                       "fx_vae_encode: image size %dx%d must be a positive multiple of %d, at most %d", height,
                       width, f, VAE_MAX_SIDE);
    int whole = run_whole(ctx, v, &ctx->err);
    if (whole < 0) return ctx->err.code;
    const vae_exec ex = exec_of(v, 1, image, height, width, mean);
    if (whole) return vae_whole_run_net(ctx, v->dev, &ex);
    vae_stream r;
    run_begin(&r, ctx, v, &ex);
    double t0 = fx_now_s();
    flux_status st = vae_stream_init(&r);
    if (!st) st = vae_stream_run(&r);
    return run_end(&r, v, st, t0, fx_vae_encode_flops(v, height, width));
}
