/*
 * ctx.h — the inside of a flux_ctx (library-internal).
 *
 * A context owns everything: options, the last error, the kernel table and
 * thread count, scratch memory, and each loaded model component. Component
 * types are defined by their own modules; the context only holds pointers.
 */
#ifndef FX_CTX_H
#define FX_CTX_H

#include "flux.h"
#include "src/base/error.h"
#include "src/base/log.h"
#include "simd/kernels.h"
#include "src/ops/ops.h"

struct fx_model;      /* model.h: folder, configs, opened weight files */
struct fx_tokenizer;  /* tokenizer.h */
struct fx_qwen3;      /* qwen3.h: text encoder */
struct fx_dit;        /* transformer.h */
struct fx_vae;        /* vae.h */
struct fx_embcache;   /* embcache.h */

struct flux_ctx {
    flux_options opt;
    char *cache_dir;            /* owned copy of opt.cache_dir (or NULL) */
    fx_err err;
    fx_logger log;              /* opt.verbose */
    int threads;
    int force_f32;              /* FLUX_PRECISION_F32 */
    const fx_kernels *kernels;
    fx_scratch *scratch;
    fx_packcache *packs;        /* weights repacked for the AMX tiles (kc.packs) */
    fx_kctx kc;                 /* kernels + threads + scratch, for fx_* calls */
    fx_ops *ops;                /* the backend the stages run on (src/ops) */
    fx_err backend_err;         /* why the asked-for backend could not open
                                   (FLUX_BACKEND_VULKAN): every load fails with it */

    struct fx_model *model;
    struct fx_tokenizer *tokenizer;
    struct fx_qwen3 *text_encoder;
    struct fx_dit *transformer;
    struct fx_vae *vae;
    struct fx_embcache *embcache;
};

/* Copy an fx_err into the context's error and return its code. */
flux_status fx_ctx_fail_from(flux_ctx *ctx, const fx_err *e);

#endif
