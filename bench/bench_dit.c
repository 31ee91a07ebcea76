/*
 * bench_dit.c — `flux-bench dit`: one transformer forward pass (the work of
 * one denoising step) on a model folder, at a given image size and number
 * of stacked sequences (B = 2 is a CFG step, N a batch of N images).
 *
 *   flux-bench dit --model DIR [--width 256 --height 256] [--batch 1]
 *
 * Inputs are random (text embeddings, noisy latents); the time does not
 * depend on the values. Reports seconds per forward, GFLOPS (flops from
 * fx_dit_run_flops) and % of the measured bf16 (or f32) peak. The default
 * run (no command) measures nothing: it needs a model folder.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "ctx.h"
#include "transformer.h"

typedef struct dit_problem {
    fx_dit_run *run;
    const float *x;
    float *v;
    float sigma;
    int failed;
} dit_problem;

static void run_forward(void *arg) {
    dit_problem *p = arg;
    if (fx_dit_forward(p->run, p->x, p->sigma, p->v, NULL, NULL) != FLUX_OK) p->failed = 1;
}

static int dit_main(int argc, char **argv, const fx_bench_env *env) {
    int bad = 0;
    const char *model = fx_bench_arg_str(argc, argv, "--model", NULL);
    int64_t width = fx_bench_arg_int(argc, argv, "--width", 256, &bad);
    int64_t height = fx_bench_arg_int(argc, argv, "--height", 256, &bad);
    int64_t batch = fx_bench_arg_int(argc, argv, "--batch", 1, &bad);
    if (bad || !model || width < 16 || height < 16 || width % 16 || height % 16 || batch < 1 || batch > 64) {
        fprintf(stderr, "usage: flux-bench dit --model DIR [--width W --height H (multiples of 16)] [--batch B]\n");
        return -1;
    }
    flux_options o;
    flux_options_init(&o);
    o.threads = env->threads;
    o.precision = env->force_f32 ? FLUX_PRECISION_F32 : FLUX_PRECISION_DEFAULT;
    o.isa = fx_isa_name((fx_isa)env->isa);
    flux_ctx *ctx = flux_new(&o);
    fx_dit *dit = NULL;
    fx_dit_run *run = NULL;
    float *emb = NULL, *x = NULL, *v = NULL;
    int rc = -1;
    if (!ctx) return -1;
    if (flux_load(ctx, model, NULL) != FLUX_OK || fx_dit_get(ctx, &dit) != FLUX_OK) goto out;
    const fx_dit_config *c = fx_dit_cfg(dit);
    fx_dit_layout lay = {.batch = (int)batch, .text_len = FLUX_TEXT_TOKENS, .n_images = 1,
                         .grid_h = {(int)height / 16}, .grid_w = {(int)width / 16}};
    if (fx_dit_run_new(ctx, dit, &lay, &run) != FLUX_OK) goto out;
    int64_t n = (int64_t)lay.grid_h[0] * lay.grid_w[0];
    emb = malloc((size_t)FLUX_TEXT_TOKENS * c->text_dim * sizeof(float));
    x = malloc((size_t)(batch * n * c->in_channels) * sizeof(float));
    v = malloc((size_t)(batch * n * c->out_channels) * sizeof(float));
    if (!emb || !x || !v) goto out;
    uint64_t s = 88172645463325252ull;
    for (int64_t i = 0; i < (int64_t)FLUX_TEXT_TOKENS * c->text_dim; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        emb[i] = (float)((double)(s >> 11) * 0x1p-53 - 0.5);
    }
    for (int64_t i = 0; i < batch * n * c->in_channels; i++) x[i] = emb[i % ((int64_t)FLUX_TEXT_TOKENS * c->text_dim)] * 2.0f;
    const float *texts[64];
    for (int b = 0; b < batch; b++) texts[b] = emb;
    if (fx_dit_run_set_text(run, texts) != FLUX_OK) goto out;
    dit_problem p = {run, x, v, 0.9f, 0};
    double t = fx_bench_time(env, run_forward, &p);
    if (p.failed) goto out;
    fx_bench_result r;
    memset(&r, 0, sizeof r);
    r.op = "dit";
    snprintf(r.shape, sizeof r.shape, "%lldx%lld B=%lld tokens=%lld d=%d blocks=%d+%d", (long long)width,
             (long long)height, (long long)batch, (long long)(FLUX_TEXT_TOKENS + n), c->hidden, c->double_blocks,
             c->single_blocks);
    snprintf(r.shape_json, sizeof r.shape_json, "\"width\":%lld,\"height\":%lld,\"batch\":%lld,\"hidden\":%d",
             (long long)width, (long long)height, (long long)batch, c->hidden);
    r.dtype = env->force_f32 ? "f32" : "bf16";
    r.isa = fx_isa_name(fx_kernels_isa(ctx->kernels));
    r.threads = ctx->threads;
    r.seconds = t;
    r.flops = fx_dit_run_flops(run);
    r.peak = fx_kernels_uses_bf16_dot(ctx->kernels) ? FX_PEAK_BF16_DOT : FX_PEAK_FMA_F32;
    fx_bench_report(env, &r);
    rc = 0;
out:
    if (rc) fprintf(stderr, "flux-bench dit: %s\n", flux_error(ctx)[0] ? flux_error(ctx) : "out of memory");
    fx_dit_run_free(run);
    free(emb), free(x), free(v);
    flux_free(ctx);
    return rc;
}

FX_BENCH_COMMAND(dit, "dit --model DIR [--width W --height H --batch B]   one transformer forward (a denoising step)",
                 dit_main, NULL)
