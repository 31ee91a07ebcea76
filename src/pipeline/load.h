/*
 * load.h — the model inside a context (load.c; flux_load is in flux.h).
 */
#ifndef FX_LOAD_H
#define FX_LOAD_H

#include "src/model/ctx.h"

/* Free every component built on the loaded model (tokenizer, text encoder,
 * transformer, VAE, embedding cache), then the model; the context is then
 * as after flux_new. */
void fx_ctx_release_model(flux_ctx *ctx);

#endif
