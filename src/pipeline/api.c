/*
 * api.c — context lifecycle: options, creation (kernel table, threads,
 * scratch), errors, CPU information.
 */
#include "load.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* The kernel table: the one that wins on this CPU, or the level forced by
 * opt->isa or FLUX_ISA. An unknown or unsupported name is reported (naming
 * where it came from) and the CPU's own choice kept. */
static const fx_kernels *choose_kernels(const flux_options *opt, int force_f32, fx_err *err) {
    const char *want = opt->isa ? opt->isa : getenv("FLUX_ISA");
    if (!want || !*want) return fx_kernels_best(force_f32);
    const char *from = opt->isa ? "ISA " : "FLUX_ISA=";
    int isa = fx_isa_parse(want);
    char why[512];
    if (isa < 0) {
        fx_fail(err, FLUX_ERR_UNSUPPORTED, "%s'%s' is unknown (ISAs: scalar, avx2, avx512, avx512bf16, amx, neon)", from, want);
        return fx_kernels_best(force_f32);
    }
    if (!fx_isa_check((fx_isa)isa, why, sizeof why)) {
        fx_fail(err, FLUX_ERR_UNSUPPORTED, "%s'%s' is not supported: %s", from, want, why);
        return fx_kernels_best(force_f32);
    }
    return fx_kernels_get((fx_isa)isa, force_f32);
}

/* FLUX_PRECISION=f32|int8|bf16|default overrides opt->precision; another value
 * is reported in flux_error (the CLI exits on it) and opt->precision runs. */
static flux_precision choose_precision(const flux_options *opt, fx_err *err) {
    const char *prec = getenv("FLUX_PRECISION");
    if (!prec || !*prec) return opt->precision;
    if (!strcmp(prec, "f32")) return FLUX_PRECISION_F32;
    if (!strcmp(prec, "int8")) return FLUX_PRECISION_INT8;
    if (!strcmp(prec, "bf16")) return FLUX_PRECISION_BF16;
    if (!strcmp(prec, "default")) return FLUX_PRECISION_DEFAULT;
    fx_fail(err, FLUX_ERR_INVALID_ARG, "FLUX_PRECISION='%s' is not a precision (f32, int8, bf16 or default)",
            prec);
    return opt->precision;
}

/* The name of the backend list (src/ops) that opt->backend chooses. */
static const char *backend_name(flux_backend b) {
    switch (b) {
    case FLUX_BACKEND_CPU: return "cpu";
    case FLUX_BACKEND_VULKAN: return "vulkan";
    case FLUX_BACKEND_AUTO: break;
    }
    return "auto";
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
    char bad[256];
    if (fx_options_check(&ctx->opt, bad, sizeof bad)) {
        fx_fail(&ctx->options_err, FLUX_ERR_INVALID_ARG, "flux_new: %s", bad);
        ctx->opt.backend = FLUX_BACKEND_CPU; /* the context still answers --cpu-info */
    }
    ctx->log.verbose = ctx->opt.verbose;
    ctx->threads = choose_threads(&ctx->opt, &ctx->threads_fixed);
    fx_cpu_watch_init(&ctx->cpu);
    /* environment values that are not understood: the first is kept in
     * flux_error() (flux.h), the context uses the defaults */
    const flux_precision precision = choose_precision(&ctx->opt, &ctx->err);
    ctx->force_f32 = precision == FLUX_PRECISION_F32;
    ctx->int8_asked = precision == FLUX_PRECISION_INT8;
    ctx->precision_bf16 = precision == FLUX_PRECISION_BF16;
    ctx->kernels = choose_kernels(opt ? opt : &ctx->opt, ctx->force_f32, &ctx->err);
    /* --precision int8: every transformer and text-encoder weight W8A8;
     * quantized weights in the default mode: int8 where the kernels' choice
     * says so (fx_kernels_int8_by_default) */
    const int int8 = precision == FLUX_PRECISION_INT8 ? FX_INT8_ALL
                     : precision == FLUX_PRECISION_DEFAULT && ctx->kernels && fx_kernels_int8_by_default(ctx->kernels)
                         ? FX_INT8_BLOCKS
                         : FX_INT8_OFF;
    ctx->scratch = fx_scratch_new(ctx->threads);
    if (!ctx->kernels || !ctx->scratch) goto oom;
    fx_kctx_init(&ctx->kc, ctx->kernels, ctx->threads, ctx->scratch);
    ctx->kc.int8 = int8;
    fx_mem_stats_init(&ctx->mem);
    fx_ops_opts oo = {.backend = backend_name(ctx->opt.backend), .device = ctx->opt.device, .log = &ctx->log, .mem = &ctx->mem,
                      .weight_budget = ctx->opt.device_memory_mb > UINT64_MAX >> 20 ? UINT64_MAX
                                                                                     : ctx->opt.device_memory_mb << 20};
    if (getenv("FLUX_VK_VALIDATION") && !strcmp(getenv("FLUX_VK_VALIDATION"), "1")) oo.validation = 1;
    if (fx_ops_open(&oo, &ctx->kc, &ctx->ops, &ctx->backend_err) != FLUX_OK) {
        oo.backend = "cpu"; /* the context still answers --cpu-info; loads fail with backend_err */
        oo.log = NULL;
        if (fx_ops_open(&oo, &ctx->kc, &ctx->ops, &ctx->err) != FLUX_OK) goto oom;
        ctx->err = ctx->backend_err;
    }
    if (ctx->err.msg[0] && !ctx->backend_err.msg[0]) /* an environment value was not understood */
        fx_log(&ctx->log, 1, "flux: %s; running %s", ctx->err.msg, fx_kernels_name(ctx->kernels));
    if (ctx->options_err.msg[0]) ctx->err = ctx->options_err; /* the first thing to tell */
    if (ctx->opt.verbose >= 1) {
        char amx[512];
        int on = fx_isa_check(FX_ISA_AMX, amx, sizeof amx);
        fx_log(&ctx->log, 1, "flux: kernels %s; AMX %s%s", fx_kernels_name(ctx->kernels), on ? "usable" : "off: ", on ? "" : amx);
    }
    return ctx;
oom:
    fx_ops_close(ctx->ops);
    fx_scratch_free(ctx->scratch);
    free(ctx->cache_dir);
    free(ctx);
    return NULL;
}

void flux_free(flux_ctx *ctx) {
    if (!ctx) return;
    fx_ctx_forget_model(ctx);
    fx_ops_close(ctx->ops);
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
                     ctx->force_f32 ? "f32"
                     : ctx->int8_asked ? "int8 (W8A8 for GGUF block-type weights)"
                     : ctx->kc.int8 ? "default (bf16 dot products; W8A8 for GGUF block-type weights)"
                     : ctx->precision_bf16 ? "bf16 (bf16 dot products where available; GGUF block-type weights expanded)"
                                    : "default (bf16 dot products where available)");
    free(kern);
    flux_free(own);
    return n < 0 ? 0 : (size_t)n;
}

const char *flux_backend_name(const flux_ctx *ctx) { return ctx && ctx->ops ? fx_ops_name(ctx->ops) : "cpu"; }

flux_status flux_list_devices(flux_ctx *ctx, flux_device_info *out, int max, int *count) {
    if (!ctx || !count || (max > 0 && !out)) return FLUX_ERR_INVALID_ARG;
    enum { MAXDEV = 16 };
    fx_device_desc d[MAXDEV];
    int n = 0;
    fx_err_clear(&ctx->err);
    flux_status st = fx_ops_list_devices(d, MAXDEV, &n, &ctx->err);
    *count = n;
    if (st) return st;
    for (int i = 0; i < n && i < max && i < MAXDEV; i++) {
        memset(&out[i], 0, sizeof out[i]);
        out[i].index = d[i].index;
        out[i].usable = d[i].usable;
        out[i].memory = (unsigned long long)d[i].memory;
        snprintf(out[i].name, sizeof out[i].name, "%s", d[i].name);
        snprintf(out[i].type, sizeof out[i].type, "%s", d[i].type);
        snprintf(out[i].driver, sizeof out[i].driver, "%s", d[i].driver);
        snprintf(out[i].why_not, sizeof out[i].why_not, "%s", d[i].why_not);
    }
    return FLUX_OK;
}
