/*
 * qwen3.h — the Qwen3 text encoder of klein (diffusers pipeline_flux2_klein.py; transformers modeling_qwen3.py): token ids → the
 * stacked hidden states 9, 18, 27 that the transformer reads as text.
 *
 * Owned by the text-encoder module (src/text/qwen3.c). Weights are views into
 * the mmap'd text_encoder/ weight set (fx_model_text_encoder_weights); only
 * layers 0..layers_used−1 are touched.
 */
#ifndef FX_QWEN3_H
#define FX_QWEN3_H

#include "src/model/ctx.h"

typedef struct fx_qwen3 fx_qwen3;

/* Build the encoder from ctx->model (maps the text-encoder data if needed). */
flux_status fx_qwen3_load(flux_ctx *ctx, fx_qwen3 **out);
void fx_qwen3_free(fx_qwen3 *q);

/* ids, mask: [seq] (mask 1 = real token, 0 = padding; padding on the right).
 * out: [seq, FX_KLEIN_N_TEXT_STATES · hidden] — per token the outputs of
 * layers 8, 17, 26 back to back (diffusers pipeline_flux2_klein.py; transformers modeling_qwen3.py). */
flux_status fx_qwen3_encode(flux_ctx *ctx, fx_qwen3 *q, const int32_t *ids, const uint8_t *mask,
                            int seq, float *out);

/* Optional hook for tests and dumps: called with the embedding output
 * (layer = −1) and after every layer that runs (layer = n), x [seq, hidden]
 * = HF hidden state layer + 1. NULL removes it. */
typedef void (*fx_qwen3_observer)(void *user, int layer, const float *x, int seq, int hidden);
void fx_qwen3_set_observer(fx_qwen3 *q, fx_qwen3_observer fn, void *user);

/* Floating-point operations of one encode of seq tokens: 2·params·seq for
 * the linears of the layers that run, plus 4·(seq(seq+1)/2)·head_dim per
 * query head for causal attention (QKᵀ and P·V over the visible pairs). */
double fx_qwen3_flops(const fx_qwen3 *q, int seq);

#endif
