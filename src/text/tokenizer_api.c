/*
 * tokenizer_api.c — the tokenizer a context uses (fx_ctx_tokenizer,
 * tokenizer.h), loaded on first use from the first source the model names:
 * a GGUF text encoder's own vocabulary (tokenizer_gguf.c), a tokenizer.json
 * file (--tokenizer, or the installed copy), or the folder's
 * tokenizer/tokenizer.json; and flux_tokenize (flux.h) with it. Above
 * tokenizer.c and tokenizer_gguf.c.
 */
#include "tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/model/ctx.h"
#include "src/model/model.h"

flux_status fx_ctx_tokenizer(flux_ctx *ctx, fx_tokenizer **out) {
    *out = NULL;
    if (!ctx->tokenizer) {
        if (!ctx->model || (!ctx->model->dir && !ctx->model->tokenizer_path && !ctx->model->tokenizer_gguf))
            return fx_fail(&ctx->err, FLUX_ERR_STATE, "tokenizer: no model loaded (call flux_load first)");
        flux_status st;
        if (ctx->model->tokenizer_gguf) { /* a GGUF text encoder's own vocabulary (tokenizer_gguf.c) */
            st = fx_tokenizer_load_gguf(ctx->model->tokenizer_gguf, &ctx->tokenizer, &ctx->err);
        } else if (ctx->model->tokenizer_path) {
            st = fx_tokenizer_load(ctx->model->tokenizer_path, &ctx->tokenizer, &ctx->err);
        } else {
            size_t n = strlen(ctx->model->dir) + sizeof "/tokenizer/tokenizer.json";
            char *path = malloc(n);
            if (!path) return fx_fail(&ctx->err, FLUX_ERR_NOMEM, "out of memory");
            snprintf(path, n, "%s/tokenizer/tokenizer.json", ctx->model->dir);
            st = fx_tokenizer_load(path, &ctx->tokenizer, &ctx->err);
            free(path);
        }
        if (st) return st;
    }
    *out = ctx->tokenizer;
    return FLUX_OK;
}

flux_status flux_tokenize(flux_ctx *ctx, const char *text, int raw, int32_t *ids, int max_ids, int *n_ids) {
    if (!ctx) return FLUX_ERR_INVALID_ARG;
    if (!text || !n_ids || max_ids < 0 || (max_ids > 0 && !ids))
        return fx_fail(&ctx->err, FLUX_ERR_INVALID_ARG, "flux_tokenize: text and n_ids are required, and ids when max_ids > 0");
    fx_tokenizer *tok;
    flux_status st = fx_ctx_tokenizer(ctx, &tok);
    if (st) return st;
    fx_ids out = {0};
    size_t len = strlen(text);
    st = raw ? fx_tokenizer_encode(tok, text, len, &out, &ctx->err) : fx_tokenizer_encode_chat(tok, text, len, &out, &ctx->err);
    if (!st) {
        if (out.n > (size_t)INT32_MAX) {
            st = fx_fail(&ctx->err, FLUX_ERR_INVALID_ARG, "flux_tokenize: more than 2^31 tokens");
        } else {
            size_t k = out.n < (size_t)max_ids ? out.n : (size_t)max_ids;
            if (k) memcpy(ids, out.ids, k * sizeof(int32_t));
            *n_ids = (int)out.n;
        }
    }
    fx_ids_free(&out);
    return st;
}
