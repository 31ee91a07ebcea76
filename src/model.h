/*
 * model.h — a loaded model folder (official Hugging Face layout) and the
 * lifetime of its components inside a context.
 *
 * Owned by the loader (src/model.c). Other modules read ctx->model.
 */
#ifndef FX_MODEL_H
#define FX_MODEL_H

#include "ctx.h"

struct fx_model {
    char *dir;   /* the folder given to flux_load */
    char *name;  /* its last path component, e.g. "FLUX.2-klein-4B" */
    /* configs and opened weight sets: added by the loader */
};

/* Release every loaded component of the context (weights, tokenizer, ...). */
void fx_model_release_all(flux_ctx *ctx);

#endif
