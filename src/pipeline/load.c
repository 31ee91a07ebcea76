/*
 * load.c — flux_load(): a model folder into the context, and the release of
 * every component built on it (tokenizer, text encoder, transformer, VAE,
 * embedding cache) before the weights they point into.
 */
#include "load.h"

#include "adapters.h"
#include "src/dit/transformer.h"
#include "src/model/model.h"
#include "embcache.h"
#include "src/text/qwen3.h"
#include "src/text/tokenizer.h"
#include "src/vae/vae.h"

#include <stdlib.h>
#include <string.h>

/* Forget a pending reload's folder (not its adapters). */
static void drop_reload_dir(flux_ctx *ctx) {
    free(ctx->reload.dir);
    fx_load_options_free(&ctx->reload.lo);
    ctx->reload.dir = NULL;
    memset(&ctx->reload.lo, 0, sizeof ctx->reload.lo);
    ctx->reload.use_mmap = 0;
}

/* Forget a pending reload. */
static void drop_reload(flux_ctx *ctx) {
    drop_reload_dir(ctx);
    fx_adapters_forget(ctx);
}

void fx_ctx_release_model(flux_ctx *ctx) {
    if (!ctx) return;
    fx_tokenizer_free(ctx->tokenizer);
    ctx->tokenizer = NULL;
    fx_embcache_release(ctx);
    fx_qwen3_free(ctx->text_encoder);
    ctx->text_encoder = NULL;
    fx_dit_free(ctx->transformer);
    ctx->transformer = NULL;
    fx_adapters_free(ctx); /* resolved against this model */
    fx_vae_free(ctx->vae);
    ctx->vae = NULL;
    fx_model_free(ctx->model);
    ctx->model = NULL;
}

void fx_ctx_forget_model(flux_ctx *ctx) {
    if (!ctx) return;
    fx_ctx_release_model(ctx);
    drop_reload(ctx);
}

flux_status flux_load(flux_ctx *ctx, const char *model_dir, const flux_load_options *lo) {
    if (!ctx) return FLUX_ERR_INVALID_ARG;
    fx_err *err = &ctx->err;
    fx_err_clear(err);
    if (ctx->options_err.msg[0] || ctx->backend_err.msg[0]) { /* a bad flux_options field, --backend vulkan
                                                                  without a device: nothing loads */
        ctx->err = ctx->options_err.msg[0] ? ctx->options_err : ctx->backend_err;
        return ctx->err.code;
    }
    flux_load_options defaults;
    if (!lo) {
        flux_load_options_init(&defaults);
        lo = &defaults;
    }
    char bad[256];
    if (fx_load_options_check(lo, bad, sizeof bad)) return fx_fail(err, FLUX_ERR_INVALID_ARG, "flux_load: %s", bad);
    if ((!model_dir || !*model_dir) && (!lo->transformer_file || !lo->text_encoder_file || !lo->vae_file))
        return fx_fail(err, FLUX_ERR_INVALID_ARG,
                       "flux_load: no model folder given (without one, the load options must name the transformer, "
                       "text encoder and VAE files)");
    fx_ctx_forget_model(ctx);
    TRY(fx_model_open(model_dir, lo, ctx->opt.use_mmap, &ctx->log, &ctx->kc, &ctx->model, err));
    flux_status st = FLUX_OK;
    if (ctx->ops && !fx_ops_on_host(ctx->ops) && /* the layouts a device cannot read: refused now, not per job */
        ((st = fx_wset_check_device(ctx->model->transformer_w, err)) ||
         (st = fx_wset_check_device(ctx->model->text_encoder_w, err))))
        fx_ctx_forget_model(ctx);
    return st;
}

flux_status fx_ctx_fresh_model(flux_ctx *ctx) {
    const struct fx_model *m = ctx->model;
    if (m) {
        fx_err why = {0};
        if (!fx_model_check_faults(m, &why) && !fx_model_check_unchanged(m, &why))
            return ctx->reload.n_lora ? fx_adapters_restore(ctx) : FLUX_OK; /* adapters still to attach again */
        fx_log(&ctx->log, 1, "flux: %s; loading the model again", why.msg);
        /* the folder, options and adapters outlive the model, until loaded again */
        drop_reload(ctx);
        ctx->reload.dir = strdup(m->dir ? m->dir : ""); /* "": loaded from files alone */
        const int lo_ok = !fx_load_options_copy(&ctx->reload.lo, &m->lo);
        ctx->reload.use_mmap = m->use_mmap;
        const int adapters_ok = fx_adapters_remember(ctx) == FLUX_OK;
        fx_ctx_release_model(ctx);
        if (!ctx->reload.dir || !lo_ok || !adapters_ok) return fx_fail(&ctx->err, FLUX_ERR_NOMEM, "out of memory");
    }
    if (ctx->reload.dir) {
        flux_status st = fx_model_open(ctx->reload.dir, &ctx->reload.lo, ctx->reload.use_mmap, &ctx->log, &ctx->kc,
                                       &ctx->model, &ctx->err);
        if (st) return fx_prefix(&ctx->err, "the model's files changed since it was loaded, and loading it again failed");
        drop_reload_dir(ctx);
    }
    /* its LoRA adapters, resolved against the new weights (never dropped silently) */
    return ctx->reload.n_lora ? fx_adapters_restore(ctx) : FLUX_OK;
}

flux_status flux_get_model_info(const flux_ctx *ctx, flux_model_info *info) {
    if (!ctx || !info) return FLUX_ERR_INVALID_ARG;
    const struct fx_model *m = ctx->model;
    if (!m) return fx_fail((fx_err *)&ctx->err, FLUX_ERR_STATE, "no model is loaded (call flux_load first)");
    memset(info, 0, sizeof *info);
    info->name = m->name;
    info->distilled = m->distilled;
    info->hidden = m->dit.hidden;
    info->heads = m->dit.heads;
    info->head_dim = m->dit.head_dim;
    info->double_blocks = m->dit.double_blocks;
    info->single_blocks = m->dit.single_blocks;
    info->text_dim = m->dit.text_dim;
    info->text_hidden = m->qwen3.hidden;
    info->text_layers_used = m->qwen3.layers_used;
    info->latent_channels = m->dit.in_channels;
    info->default_steps = m->distilled ? 4 : 50;
    info->default_guidance = m->distilled ? 1.0f : 4.0f;
    info->variant_reason = m->variant_why;
    return FLUX_OK;
}
