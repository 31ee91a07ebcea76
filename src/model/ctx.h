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
#include "src/base/cpu_load.h"
#include "src/base/error.h"
#include "src/base/log.h"
#include "src/base/mem_stats.h"
#include "simd/kernels.h"
#include "src/ops/ops.h"

struct fx_model;      /* model.h: folder, configs, opened weight files */
struct fx_tokenizer;  /* tokenizer.h */
struct fx_qwen3;      /* qwen3.h: text encoder */
struct fx_dit;        /* transformer.h */
struct fx_vae;        /* vae.h */
struct fx_embcache;   /* embcache.h */
struct fx_adapters;   /* src/pipeline/adapters.h: LoRA files on the transformer */

/* The generation under way, for the stages' checkpoints (fx_ctx_checkpoint):
 * the caller's progress callback and where the pipeline is. */
typedef struct fx_ctx_progress {
    flux_progress_fn fn;        /* NULL: nobody listens */
    void *user;
    flux_stage stage;
    int step, total;            /* the stage's main units (steps, images) */
} fx_ctx_progress;

struct flux_ctx {
    flux_options opt;
    char *cache_dir;            /* owned copy of opt.cache_dir (or NULL) */
    fx_err err;
    fx_logger log;              /* opt.verbose */
    int threads;                /* the most threads kernels use (scratch is
                                   sized for it); kc.threads is the current
                                   count, <= threads */
    int threads_fixed;          /* opt.threads or OMP_NUM_THREADS given: never
                                   adapted to the load */
    fx_cpu_watch cpu;           /* idle CPUs, for the adaptive default */
    fx_ctx_progress progress;
    int force_f32;              /* FLUX_PRECISION_F32 */
    int int8_asked;             /* FLUX_PRECISION_INT8 (kc.int8 may also come from the default mode) */
    int precision_bf16;         /* FLUX_PRECISION_BF16: the default mode, quantized weights never int8 */
    const fx_kernels *kernels;
    fx_scratch *scratch;
    fx_kctx kc;                 /* kernels + threads + scratch, for fx_* calls */
    fx_ops *ops;                /* the backend the stages run on (src/ops) */
    fx_mem_stats mem;           /* memory by kind, sampled at checkpoints (-v) */
    fx_err backend_err;         /* why the asked-for backend could not open
                                   (FLUX_BACKEND_VULKAN): every load fails with it */
    fx_err options_err;         /* a flux_options field out of range (flux.h):
                                   every load and quantize fails with it */

    struct fx_model *model;
    /* a model whose files changed on disk and could not be loaded again yet
     * (load.c: retried when the next call starts); dir NULL: none. Its LoRA
     * adapters (path, scale; in order) wait here until attached again. */
    struct {
        char *dir;
        flux_load_options lo;   /* transformer_file owned */
        int use_mmap;
        char *lora_path[FLUX_MAX_LORAS];
        float lora_scale[FLUX_MAX_LORAS];
        int n_lora;
    } reload;
    struct fx_tokenizer *tokenizer;
    struct fx_qwen3 *text_encoder;
    struct fx_dit *transformer;
    struct fx_vae *vae;
    struct fx_embcache *embcache;
    struct fx_adapters *adapters;
};

/* Copy an fx_err into the context's error and return its code. */
flux_status fx_ctx_fail_from(flux_ctx *ctx, const fx_err *e);

/* Between two units of work of a stage (a Qwen3 layer, a transformer block,
 * a VAE decoder stage; ctx.c): adapt the thread count to the idle CPUs
 * (unless fixed), fail if a mapped weight file was cut short under a read
 * (map_guard.h), then report substep/subtotal of the current stage to the
 * progress callback; a non-zero return of the callback gives
 * FLUX_ERR_CANCELLED, so a generation stops within one such unit. */
flux_status fx_ctx_checkpoint(flux_ctx *ctx, int substep, int subtotal);

/* Sample memory by kind now (ctx->mem; also done at every checkpoint). */
void fx_ctx_sample_memory(flux_ctx *ctx);

/* The pipeline enters a stage, or moves to its step (of total main units):
 * what the next checkpoints report. */
void fx_ctx_set_stage(flux_ctx *ctx, flux_stage stage, int step, int total);

/* The adaptive thread count alone (kc.threads = idle CPUs, at most
 * ctx->threads), for callers between stages. */
void fx_ctx_adapt_threads(flux_ctx *ctx);

#endif
