/*
 * text_encode.h — the context's text encoder: built on first use, released
 * on request, results cached by content (text_encode.c, embcache.h).
 */
#ifndef FX_TEXT_ENCODE_H
#define FX_TEXT_ENCODE_H

#include <stdint.h>

#include "src/model/ctx.h"

/* The context's encoder on (ids, mask) → out [seq, 3·hidden]: loads it on
 * first use or after flux_release_text_encoder (text_encode.c). The
 * result depends only on the model, the precision mode and (ids, mask). */
flux_status fx_text_encode_ids(flux_ctx *ctx, const int32_t *ids, const uint8_t *mask, int seq, float *out);

/* flux_encode_text without its checks and guards (for the pipeline, which
 * does those once per generation): prompt → [512, 3·hidden] through the
 * embedding cache. */
flux_status fx_text_encode(flux_ctx *ctx, const char *prompt, float *out);

/* Free ctx->text_encoder and drop its mapped weights (reloaded on demand). */
void fx_text_encoder_release(flux_ctx *ctx);

#endif
