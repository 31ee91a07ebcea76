/*
 * text_encode.c — prompt → klein text embeddings (flux_encode_text), and the
 * text encoder's lifetime inside a context: built on first use, released
 * with flux_release_text_encoder (weights unmapped, so RSS falls by their
 * size) and rebuilt on the next encode.
 *
 *   prompt → tokenizer (chat template, truncate/pad to 512, mask)   tokenizer.h
 *          → Qwen3 → out [512, 3·hidden]                           qwen3.h
 */
#include "text_encode.h"

#include "embcache.h"
#include "load.h"
#include "src/formats/map_guard.h"
#include "src/model/model.h"
#include "src/text/qwen3.h"
#include "src/text/tokenizer.h"

flux_status fx_text_encode_ids(flux_ctx *ctx, const int32_t *ids, const uint8_t *mask, int seq, float *out) {
    if (!ctx->model) return fx_fail(&ctx->err, FLUX_ERR_STATE, "text encoding: no model loaded (call flux_load first)");
    if (!ctx->text_encoder) {
        flux_status st = fx_qwen3_load(ctx, &ctx->text_encoder);
        if (st) return st;
    }
    return fx_qwen3_encode(ctx, ctx->text_encoder, ids, mask, seq, out);
}

void fx_text_encoder_release(flux_ctx *ctx) {
    if (!ctx) return;
    fx_qwen3_free(ctx->text_encoder);
    ctx->text_encoder = NULL;
    if (ctx->model) fx_model_release_text_encoder_weights(ctx->model);
}

flux_status fx_text_encode(flux_ctx *ctx, const char *prompt, float *out) {
    fx_tokenizer *tok;
    flux_status st = fx_ctx_tokenizer(ctx, &tok);
    if (st) return st;
    int32_t ids[FLUX_TEXT_TOKENS];
    uint8_t mask[FLUX_TEXT_TOKENS];
    int n_real = 0;
    st = fx_tokenizer_encode_prompt(tok, prompt, FLUX_TEXT_TOKENS, ids, mask, &n_real, &ctx->err);
    if (st) return st;
    fx_log(&ctx->log, 2, "flux: prompt: %d tokens + %d padding", n_real, FLUX_TEXT_TOKENS - n_real);
    /* embedding cache (embcache.h): a hit never loads the encoder */
    const int cols = FX_KLEIN_N_TEXT_STATES * ctx->model->qwen3.hidden;
    uint8_t key[FX_SHA256_BYTES];
    if (fx_text_cache_lookup(ctx, ids, mask, FLUX_TEXT_TOKENS, cols, out, key)) return FLUX_OK;
    st = fx_text_encode_ids(ctx, ids, mask, FLUX_TEXT_TOKENS, out);
    if (st == FLUX_OK) fx_text_cache_store(ctx, key, FLUX_TEXT_TOKENS, cols, out);
    return st;
}

flux_status flux_encode_text(flux_ctx *ctx, const char *prompt, float *out) {
    if (!ctx) return FLUX_ERR_INVALID_ARG;
    if (!prompt || !out)
        return fx_fail(&ctx->err, FLUX_ERR_INVALID_ARG, "flux_encode_text: %s is NULL", prompt ? "out" : "prompt");
    TRY(fx_ctx_fresh_model(ctx));
    fx_map_guard_enter(); /* a weight file cut short under the mapping: an error, not SIGBUS */
    flux_status st = fx_text_encode(ctx, prompt, out);
    fx_map_guard_leave();
    return st;
}

void flux_release_text_encoder(flux_ctx *ctx) { fx_text_encoder_release(ctx); }
