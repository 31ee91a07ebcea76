/*
 * bench_vae.c — `flux-bench vae`: one VAE decode (or encode) on a model
 * folder at a given image size.
 *
 *   flux-bench vae --model DIR [--width 256 --height 256] [--encode]
 *                  [--storage auto|f32|bf16]
 *   flux-bench vae --model DIR --width W --compare
 *
 * --compare (decode only, not timed): the image-level effect of storing the
 * activations in bf16. Decodes the same latent in the default mode with
 * bf16, f32 and the automatic (bf16 at the two largest levels) storage, and
 * with FLUX_PRECISION=f32, then prints max / mean |difference| of the RGB8
 * images (diffusers rounding) and of the raw outputs.
 *
 * Inputs are random (a normal latent, or a smooth image); the time does not
 * depend on the values. Reports seconds, GFLOPS (fx_vae_*_flops), % of the
 * measured bf16 (or f32) peak, the time inside the conv GEMMs, and the
 * activation memory (arena and peak, MiB). The default run measures
 * nothing: it needs a model folder (tools/gen_model --preset klein-4b, or
 * --preset tiny --vae-channels 128,256,512,512 --vae-layers 2 for the real
 * VAE alone).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "src/model/ctx.h"
#include "src/model/model.h"
#include "src/vae/vae.h"

typedef struct vae_problem {
    flux_ctx *ctx;
    fx_vae *v;
    int encode, h, w;
    const float *in;
    float *out;
    int failed;
} vae_problem;

static void run_vae(void *arg) {
    vae_problem *p = arg;
    flux_status st = p->encode ? fx_vae_encode(p->ctx, p->v, p->in, p->h, p->w, p->out)
                               : fx_vae_decode(p->ctx, p->v, p->in, p->h / 8, p->w / 8, p->out);
    if (st != FLUX_OK) p->failed = 1;
}

static void random_input(float *in, int64_t n, int encode, int64_t width) {
    uint64_t s = 88172645463325252ull;
    for (int64_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        double u = (double)(s >> 11) * 0x1p-53;
        in[i] = encode ? (float)(0.8 * sin(0.01 * (double)(i % width) + 0.02 * (double)(i / width)) + 0.1 * (u - 0.5))
                       : (float)(2.0 * u - 1.0) * 1.7f;
    }
}

/* Decode in one precision / storage; NULL on failure (message printed). */
static float *decode_once(const fx_bench_env *env, const char *model, int f32, fx_vae_storage storage, int h,
                          int w, const float *z) {
    flux_options o;
    flux_options_init(&o);
    o.threads = env->threads;
    o.precision = f32 ? FLUX_PRECISION_F32 : FLUX_PRECISION_DEFAULT;
    flux_ctx *ctx = flux_new(&o);
    fx_vae *v = NULL;
    float *out = malloc(sizeof(float) * 3 * (size_t)h * w);
    if (!ctx || !out || flux_load(ctx, model, NULL) != FLUX_OK || fx_vae_get(ctx, &v) != FLUX_OK ||
        (fx_vae_set_storage(v, storage), fx_vae_decode(ctx, v, z, h / 8, w / 8, out)) != FLUX_OK) {
        fprintf(stderr, "flux-bench vae: %s\n", ctx ? flux_error(ctx) : "out of memory");
        free(out);
        out = NULL;
    }
    flux_free(ctx);
    return out;
}

static uint8_t to_u8(float x) { /* diffusers: round(clamp(x/2 + 0.5, 0, 1)·255) */
    float v = x * 0.5f + 0.5f;
    v = v > 0 ? v : 0;
    v = v < 1 ? v : 1;
    return (uint8_t)lrintf(v * 255.0f);
}

static void compare_line(const char *what, const float *a, const float *b, int64_t n) {
    double maxd = 0, sumd = 0, maxraw = 0, sumraw = 0;
    int64_t unclamped = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)to_u8(a[i]) - to_u8(b[i])), r = fabs((double)a[i] - b[i]);
        maxd = d > maxd ? d : maxd, sumd += d;
        maxraw = r > maxraw ? r : maxraw, sumraw += r;
        unclamped += fabsf(b[i]) < 1.0f;
    }
    printf("%-34s RGB8 max %3.0f mean %.4f   raw max %.3e mean %.3e   (%.1f%% of values inside (-1, 1))\n", what,
           maxd, sumd / (double)n, maxraw, sumraw / (double)n, 100.0 * (double)unclamped / (double)n);
}

static int vae_compare(const fx_bench_env *env, const char *model, int h, int w) {
    flux_options o;
    flux_options_init(&o);
    flux_ctx *ctx = flux_new(&o);
    if (!ctx || flux_load(ctx, model, NULL) != FLUX_OK) {
        fprintf(stderr, "flux-bench vae: %s\n", ctx ? flux_error(ctx) : "out of memory");
        flux_free(ctx);
        return -1;
    }
    const int64_t n = (int64_t)ctx->model->vae.latent_channels * (h / 8) * (w / 8);
    flux_free(ctx);
    float *z = malloc(sizeof(float) * (size_t)n);
    if (!z) return -1;
    random_input(z, n, 0, w);
    float *ref = decode_once(env, model, 1, FX_VAE_STORAGE_AUTO, h, w, z);
    float *bf = decode_once(env, model, 0, FX_VAE_STORAGE_BF16, h, w, z);
    float *fs = decode_once(env, model, 0, FX_VAE_STORAGE_F32, h, w, z);
    float *au = decode_once(env, model, 0, FX_VAE_STORAGE_AUTO, h, w, z);
    int rc = ref && bf && fs && au ? 0 : -1;
    if (!rc) {
        printf("vae decode %dx%d, random latent; reference = FLUX_PRECISION=f32 (f32 math, f32 storage)\n", w, h);
        compare_line("default, bf16 storage vs f32 stor.", bf, fs, 3 * (int64_t)h * w);
        compare_line("default, f32 storage vs reference", fs, ref, 3 * (int64_t)h * w);
        compare_line("default, bf16 storage vs reference", bf, ref, 3 * (int64_t)h * w);
        compare_line("default, auto storage vs reference", au, ref, 3 * (int64_t)h * w);
    }
    free(z), free(ref), free(bf), free(fs), free(au);
    return rc;
}

static int vae_main(int argc, char **argv, const fx_bench_env *env) {
    int bad = 0;
    const char *model = fx_bench_arg_str(argc, argv, "--model", NULL);
    int64_t width = fx_bench_arg_int(argc, argv, "--width", 256, &bad);
    int64_t height = fx_bench_arg_int(argc, argv, "--height", width, &bad);
    int encode = fx_bench_arg_flag(argc, argv, "--encode");
    const char *storage = fx_bench_arg_str(argc, argv, "--storage", "auto");
    int compare = fx_bench_arg_flag(argc, argv, "--compare");
    int64_t strip = fx_bench_arg_int(argc, argv, "--strip", 0, &bad); /* output pixels per strip (tuning) */
    if (bad || !model || width < 8 || height < 8 || width % 8 || height % 8 ||
        (strcmp(storage, "auto") && strcmp(storage, "f32") && strcmp(storage, "bf16"))) {
        fprintf(stderr, "usage: flux-bench vae --model DIR [--width W --height H (multiples of 8)] [--encode] "
                        "[--storage auto|f32|bf16]\n");
        return -1;
    }
    if (compare) return vae_compare(env, model, (int)height, (int)width);
    flux_options o;
    fx_bench_flux_options(env, &o);
    flux_ctx *ctx = flux_new(&o);
    fx_vae *v = NULL;
    float *in = NULL, *out = NULL;
    int rc = -1;
    if (!ctx) return -1;
    if (flux_load(ctx, model, NULL) != FLUX_OK || fx_vae_get(ctx, &v) != FLUX_OK) goto out;
    fx_vae_set_strip_pixels(v, (int)strip);
    fx_vae_set_storage(v, !strcmp(storage, "f32") ? FX_VAE_STORAGE_F32
                          : !strcmp(storage, "bf16") ? FX_VAE_STORAGE_BF16 : FX_VAE_STORAGE_AUTO);
    const int lat = ctx->model->vae.latent_channels;
    const int64_t hw = height * width, lat_n = (int64_t)lat * (hw / 64);
    in = malloc(sizeof(float) * (size_t)(encode ? 3 * hw : lat_n));
    out = malloc(sizeof(float) * (size_t)(encode ? lat_n : 3 * hw));
    if (!in || !out) goto out;
    random_input(in, encode ? 3 * hw : lat_n, encode, width);
    vae_problem p = {ctx, v, encode, (int)height, (int)width, in, out, 0};
    double t = fx_bench_time(env, run_vae, &p);
    if (p.failed) goto out;
    const fx_vae_stats *st = fx_vae_last_stats(v);
    fx_bench_result r;
    memset(&r, 0, sizeof r);
    r.op = encode ? "vae-encode" : "vae-decode";
    snprintf(r.shape, sizeof r.shape, "%lldx%lld storage=%s", (long long)width, (long long)height, storage);
    snprintf(r.shape_json, sizeof r.shape_json, "\"width\":%lld,\"height\":%lld,\"storage\":\"%s\"", (long long)width,
             (long long)height, storage);
    r.dtype = env->force_f32 ? "f32" : "bf16";
    r.isa = fx_bench_isa_label(ctx->kernels);
    r.threads = ctx->threads;
    r.seconds = t;
    r.flops = st->flops;
    r.peak = fx_bench_peak_of(ctx->kernels, 1);
    snprintf(r.extra[r.n_extra].key, sizeof r.extra[0].key, "arena_mib");
    r.extra[r.n_extra++].value = st->arena_bytes / 1048576.0;
    snprintf(r.extra[r.n_extra].key, sizeof r.extra[0].key, "peak_mib");
    r.extra[r.n_extra++].value = st->peak_bytes / 1048576.0;
    snprintf(r.extra[r.n_extra].key, sizeof r.extra[0].key, "conv_s");
    r.extra[r.n_extra++].value = st->conv_seconds;
    snprintf(r.extra[r.n_extra].key, sizeof r.extra[0].key, "conv_gflops");
    r.extra[r.n_extra++].value = st->conv_seconds > 0 ? st->conv_flops / st->conv_seconds * 1e-9 : 0;
    snprintf(r.extra[r.n_extra].key, sizeof r.extra[0].key, "pack_s");
    r.extra[r.n_extra++].value = st->pack_seconds;
    snprintf(r.extra[r.n_extra].key, sizeof r.extra[0].key, "load_s");
    r.extra[r.n_extra++].value = st->load_seconds;
    snprintf(r.extra[r.n_extra].key, sizeof r.extra[0].key, "store_s");
    r.extra[r.n_extra++].value = st->store_seconds;
    fx_bench_report(env, &r);
    rc = 0;
out:
    if (rc) fprintf(stderr, "flux-bench vae: %s\n", flux_error(ctx)[0] ? flux_error(ctx) : "out of memory");
    free(in), free(out);
    flux_free(ctx);
    return rc;
}

FX_BENCH_COMMAND(vae, "vae --model DIR [--width W --height H --encode --storage auto|f32|bf16 --compare]   one VAE decode/encode",
                 vae_main, NULL)
