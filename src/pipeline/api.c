/*
 * api.c — context lifecycle: options, creation (kernel table, threads,
 * scratch), errors, CPU information.
 */
#include "load.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

static int default_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

/* The ISA to use: the best detected, lowered by opt->isa or FLUX_ISA. An
 * unknown or unsupported name is reported and the best level kept. */
static fx_isa choose_isa(const flux_options *opt, fx_err *err) {
    fx_isa best = fx_isa_detect();
    const char *want = opt->isa ? opt->isa : getenv("FLUX_ISA");
    if (!want || !*want) return best;
    int isa = fx_isa_parse(want);
    if (isa < 0 || !fx_kernels_get((fx_isa)isa, 0)) {
        fx_fail(err, FLUX_ERR_UNSUPPORTED, "ISA '%s' is unknown or not supported by this CPU (best: %s)",
                want, fx_isa_name(best));
        return best;
    }
    return (fx_isa)isa;
}

flux_ctx *flux_new(const flux_options *opt) {
    flux_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return NULL;
    if (opt) ctx->opt = *opt;
    else flux_options_init(&ctx->opt);
    if (ctx->opt.cache_dir) {
        ctx->cache_dir = strdup(ctx->opt.cache_dir);
        if (!ctx->cache_dir) goto oom;
        ctx->opt.cache_dir = ctx->cache_dir;
    }
    ctx->opt.isa = NULL; /* not owned; consumed below */
    ctx->log.verbose = ctx->opt.verbose;
    ctx->threads = opt && opt->threads > 0 ? opt->threads : default_threads();

    const char *prec = getenv("FLUX_PRECISION");
    ctx->force_f32 = ctx->opt.precision == FLUX_PRECISION_F32;
    int int8 = ctx->opt.precision == FLUX_PRECISION_INT8;
    if (prec && !strcmp(prec, "f32")) ctx->force_f32 = 1, int8 = 0;
    if (prec && !strcmp(prec, "int8")) ctx->force_f32 = 0, int8 = 1;
    if (prec && !strcmp(prec, "default")) ctx->force_f32 = 0, int8 = 0;

    fx_isa isa = choose_isa(opt ? opt : &ctx->opt, &ctx->err);
    ctx->kernels = fx_kernels_get(isa, ctx->force_f32);
    ctx->scratch = fx_scratch_new(ctx->threads);
    if (!ctx->kernels || !ctx->scratch) goto oom;
    fx_kctx_init(&ctx->kc, ctx->kernels, ctx->threads, ctx->scratch);
    ctx->kc.int8 = int8;
    return ctx;
oom:
    fx_scratch_free(ctx->scratch);
    free(ctx->cache_dir);
    free(ctx);
    return NULL;
}

void flux_free(flux_ctx *ctx) {
    if (!ctx) return;
    fx_ctx_release_model(ctx);
    fx_scratch_free(ctx->scratch);
    free(ctx->cache_dir);
    free(ctx);
}

const char *flux_error(const flux_ctx *ctx) { return ctx ? ctx->err.msg : "no context"; }

int flux_threads(const flux_ctx *ctx) { return ctx->threads; }

flux_status fx_ctx_fail_from(flux_ctx *ctx, const fx_err *e) {
    if (e != &ctx->err) ctx->err = *e;
    return e->code;
}

size_t flux_cpu_info(const flux_ctx *ctx, char *buf, size_t size) {
    char kern[2048];
    fx_kernels_describe(ctx->kernels, kern, sizeof kern);
    int n = snprintf(buf, size, "%s%sthreads:  %d\nprecision: %s\n", kern,
                     "", ctx->threads,
                     ctx->force_f32 ? "f32"
                     : ctx->kc.int8 ? "int8 (W8A8 for GGUF block-type weights)"
                                    : "default (bf16 dot products where available)");
    return n < 0 ? 0 : (size_t)n;
}
