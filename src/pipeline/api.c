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

/* Threads: opt.threads > 0, else OMP_NUM_THREADS when set (both fixed),
 * else the adaptive default: up to every CPU this process may use, fewer
 * while other processes keep some busy (ctx.c, cpu_load.h). Clamped to
 * 1..FLUX_MAX_THREADS (OMP_NUM_THREADS=100000 crashed libgomp). */
static int choose_threads(const flux_options *opt, int *fixed) {
    int n;
    *fixed = 1;
    if (opt->threads > 0) {
        n = opt->threads;
    } else if (getenv("OMP_NUM_THREADS") && *getenv("OMP_NUM_THREADS")) {
#ifdef _OPENMP
        n = omp_get_max_threads();
#else
        n = 1;
#endif
    } else {
        *fixed = 0;
        n = fx_cpu_available();
    }
#ifndef _OPENMP
    n = 1; /* a serial build runs one thread whatever was asked */
#endif
    return n < 1 ? 1 : n > FLUX_MAX_THREADS ? FLUX_MAX_THREADS : n;
}

/* The ISA to use: the best detected, lowered by opt->isa or FLUX_ISA. An
 * unknown or unsupported name is reported (naming where it came from) and
 * the best level kept. */
static fx_isa choose_isa(const flux_options *opt, fx_err *err) {
    fx_isa best = fx_isa_detect();
    const char *want = opt->isa ? opt->isa : getenv("FLUX_ISA");
    if (!want || !*want) return best;
    int isa = fx_isa_parse(want);
    if (isa < 0 || !fx_kernels_get((fx_isa)isa, 0)) {
        fx_fail(err, FLUX_ERR_UNSUPPORTED, "%s'%s' is %s (ISAs: scalar, avx2, avx512, avx512bf16, neon; best here: %s)",
                opt->isa ? "ISA " : "FLUX_ISA=", want, isa < 0 ? "unknown" : "not supported by this CPU",
                fx_isa_name(best));
        return best;
    }
    return (fx_isa)isa;
}

/* FLUX_PRECISION=f32|default overrides opt->precision; another value is
 * reported and ignored. */
static int choose_f32(const flux_options *opt, fx_err *err) {
    const char *prec = getenv("FLUX_PRECISION");
    if (!prec || !*prec) return opt->precision == FLUX_PRECISION_F32;
    if (!strcmp(prec, "f32")) return 1;
    if (!strcmp(prec, "default")) return 0;
    fx_fail(err, FLUX_ERR_INVALID_ARG, "FLUX_PRECISION='%s' is not a precision (f32 or default); ignored", prec);
    return opt->precision == FLUX_PRECISION_F32;
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
    ctx->threads = choose_threads(&ctx->opt, &ctx->threads_fixed);
    fx_cpu_watch_init(&ctx->cpu);
    /* environment values that are not understood: the first is kept in
     * flux_error() (flux.h), the context uses the defaults */
    ctx->force_f32 = choose_f32(&ctx->opt, &ctx->err);
    fx_isa isa = choose_isa(opt ? opt : &ctx->opt, &ctx->err);
    ctx->kernels = fx_kernels_get(isa, ctx->force_f32);
    ctx->scratch = fx_scratch_new(ctx->threads);
    if (!ctx->kernels || !ctx->scratch) goto oom;
    fx_kctx_init(&ctx->kc, ctx->kernels, ctx->threads, ctx->scratch);
    return ctx;
oom:
    fx_scratch_free(ctx->scratch);
    free(ctx->cache_dir);
    free(ctx);
    return NULL;
}

void flux_free(flux_ctx *ctx) {
    if (!ctx) return;
    fx_ctx_forget_model(ctx);
    fx_scratch_free(ctx->scratch);
    free(ctx->cache_dir);
    free(ctx);
}

const char *flux_error(const flux_ctx *ctx) { return ctx ? ctx->err.msg : "no context"; }

int flux_threads(const flux_ctx *ctx) { return ctx ? ctx->threads : 0; }

flux_status fx_ctx_fail_from(flux_ctx *ctx, const fx_err *e) {
    if (e != &ctx->err) ctx->err = *e;
    return e->code;
}

size_t flux_cpu_info(const flux_ctx *ctx, char *buf, size_t size) {
    if (!buf) size = 0;
    flux_ctx *own = NULL;
    if (!ctx && !(ctx = own = flux_new(NULL))) { /* what a default context would use */
        if (size) buf[0] = '\0';
        return 0;
    }
    char *kern = malloc(4096);
    if (kern) fx_kernels_describe(ctx->kernels, kern, 4096);
    int n = snprintf(buf, size, "%sthreads:  %d (%s)\nprecision: %s\n", kern ? kern : "", ctx->threads,
                     ctx->threads_fixed ? "fixed" : "adaptive: fewer while other processes keep CPUs busy",
                     ctx->force_f32 ? "f32" : "default (bf16 dot products where available)");
    free(kern);
    flux_free(own);
    return n < 0 ? 0 : (size_t)n;
}
