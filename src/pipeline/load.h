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
/* The same, and no pending reload (fx_ctx_fresh_model): flux_load, flux_free. */
void fx_ctx_forget_model(flux_ctx *ctx);

/* When a call that reads weights starts (flux_generate, flux_encode_text):
 * if a weight file of the loaded model was replaced, rewritten or cut short
 * since flux_load, load the folder again with the same options (components
 * built on the old files go); a failure to load names the problem. */
flux_status fx_ctx_fresh_model(flux_ctx *ctx);

/* The public option structs' fields against the ranges flux.h gives them
 * (options.c): 0, or 1 with "flux_options.FIELD is VALUE, not ..." in msg.
 * flux_new keeps the first such message (every load and quantize fails
 * with it, FLUX_ERR_INVALID_ARG); flux_load checks its options. */
int fx_options_check(const flux_options *opt, char *msg, size_t size);
int fx_load_options_check(const flux_load_options *lo, char *msg, size_t size);

#endif
