/*
 * quant_ref.h — the reference quantizers shared between quantize.c (32-blocks,
 * the dispatch by dtype) and quantize_k.c (K-quants). simd/quant-internal.
 */
#ifndef FX_QUANT_REF_H
#define FX_QUANT_REF_H

#include "quant.h"

/* Quantize nb blocks (elements for F32/F16/BF16) of finite values. */
typedef void (*fx_quant_fn)(const float *x, int64_t nb, uint8_t *dst);

void fx_quant_ref_q2_k(const float *x, int64_t nb, uint8_t *dst);
void fx_quant_ref_q3_k(const float *x, int64_t nb, uint8_t *dst);
void fx_quant_ref_q4_k(const float *x, int64_t nb, uint8_t *dst);
void fx_quant_ref_q5_k(const float *x, int64_t nb, uint8_t *dst);
void fx_quant_ref_q6_k(const float *x, int64_t nb, uint8_t *dst);

#endif
