/*
 * model.h — a loaded model folder (official Hugging Face layout) and the
 * lifetime of its components inside a context.
 */
#ifndef FX_MODEL_H
#define FX_MODEL_H

#include "ctx.h"

/* Release every loaded component of the context (weights, tokenizer, ...). */
void fx_model_release_all(flux_ctx *ctx);

#endif
