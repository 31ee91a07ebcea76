/*
 * adapters.h — the LoRA adapters of a context (flux_lora_* in flux.h):
 * the parsed files (src/adapters/lora.h), their strengths, and the terms
 * attached to the transformer (fx_dit_set_adapters).
 */
#ifndef FX_ADAPTERS_H
#define FX_ADAPTERS_H

#include "src/model/ctx.h"

/* Free every adapter (the transformer must be freed first, or detached).
 * The transformer exists whenever an adapter does (flux_lora_load builds it),
 * so it never needs attaching later. */
void fx_adapters_free(flux_ctx *ctx);

/* Keep the adapters' paths and strengths in ctx->reload (the model is about
 * to be loaded again: they were resolved against its weights); FLUX_ERR_NOMEM. */
flux_status fx_adapters_remember(flux_ctx *ctx);
/* Load the remembered adapters against the model loaded again, in order;
 * one that fails stays remembered (with those after it) and is the error. */
flux_status fx_adapters_restore(flux_ctx *ctx);
/* Forget remembered adapters. */
void fx_adapters_forget(flux_ctx *ctx);

/* For image metadata: the prompt followed by " <lora:NAME:SCALE>" per
 * adapter with a nonzero scale (*tagged), and "NAME:SCALE, ..." (*list;
 * NULL when there is none). malloc'd; FLUX_ERR_NOMEM. */
flux_status fx_adapters_tags(const flux_ctx *ctx, const char *prompt, char **tagged, char **list);

#endif
