/*
 * ctx.c — the checkpoints of a running generation (ctx.h): between units of
 * work the stages (src/text, src/dit, src/vae) call fx_ctx_checkpoint,
 * which adapts the thread count and reports progress / takes cancellation.
 */
#include "ctx.h"

#include "model.h"

void fx_ctx_adapt_threads(flux_ctx *ctx) {
    if (ctx->threads_fixed) return;
    int idle = fx_cpu_watch_idle(&ctx->cpu);
    ctx->kc.threads = idle < ctx->threads ? idle : ctx->threads;
}

/* Memory by kind at this point (mem_stats.h): the process's resident pages
 * and the sizes only their owners know. */
void fx_ctx_sample_memory(flux_ctx *ctx) {
    fx_mem_set(&ctx->mem, FX_MEM_SCRATCH, (int64_t)fx_scratch_bytes(ctx->scratch));
    fx_mem_sample(&ctx->mem);
}

flux_status fx_ctx_checkpoint(flux_ctx *ctx, int substep, int subtotal) {
    fx_ctx_adapt_threads(ctx);
    fx_ctx_sample_memory(ctx);
    if (ctx->model) TRY(fx_model_check_faults(ctx->model, &ctx->err)); /* a weight file cut short under us */
    const fx_ctx_progress *p = &ctx->progress;
    if (p->fn && p->fn(p->user, p->stage, p->step, p->total, substep, subtotal))
        return fx_fail(&ctx->err, FLUX_ERR_CANCELLED, "generation cancelled by the progress callback");
    return FLUX_OK;
}

void fx_ctx_set_stage(flux_ctx *ctx, flux_stage stage, int step, int total) {
    ctx->progress.stage = stage;
    ctx->progress.step = step;
    ctx->progress.total = total;
}
