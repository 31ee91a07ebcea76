/*
 * quant_ref.h — the reference quantizers shared between quantize.c (32-blocks,
 * the dispatch by dtype) and quantize_k.c (K-quants). simd/quant-internal.
 */
#ifndef FX_QUANT_REF_H
#define FX_QUANT_REF_H

#include "quant.h"

/* The K-quants' reference quantizer (t: Q2_K .. Q6_K). */
void fx_quant_ref_k(fx_dtype t, const float *x, int64_t nb, uint8_t *dst);

/* The K-quants in three steps, so that vector quantizers can replace the
 * search (and the final re-quantization) while sharing the rest:
 *   1. search: per sub-block a scale (and min) and codes L (L + offset as
 *      the type stores it, in [0, 2^bits));
 *   2. codes: the super-block fields from the sub-block scales (d, dmin,
 *      scale codes, written into the block y) and each sub-block's decoded
 *      scale d[j] and min dm[j];
 *   3. requant (fx_kquant_requant_ref or a vector one), then pack L into y.
 * Each takes one super-block: x[256], y its bytes. */
void fx_q2k_search_ref(const float *x, float scales[16], float mins[16], uint8_t L[256]);
void fx_q2k_codes(const float scales[16], const float mins[16], uint8_t *y, float d[16], float dm[16]);
void fx_q2k_pack(const uint8_t L[256], uint8_t *y);
void fx_q3k_search_ref(const float *x, float scales[16], uint8_t L[256]);
void fx_q3k_codes(const float scales[16], uint8_t *y, float d[16]);
void fx_q3k_pack(const uint8_t L[256], uint8_t *y);
/* nmax 15: Q4_K, 31: Q5_K */
void fx_q45k_search_ref(const float *x, int nmax, float scales[8], float mins[8], uint8_t L[256]);
void fx_q45k_codes(const float scales[8], const float mins[8], uint8_t *y, float d[8], float dm[8]);
void fx_q4k_pack(const uint8_t L[256], uint8_t *y);
void fx_q5k_pack(const uint8_t L[256], uint8_t *y);
void fx_q6k_search_ref(const float *x, float scales[16], uint8_t L[256]);
/* 0: an all-zero super-block, y already written (skip steps 3) */
int fx_q6k_codes(const float scales[16], uint8_t *y, float d[16]);
void fx_q6k_pack(const uint8_t L[256], uint8_t *y);

/* Step 3: sub-block j (n elements) with d[j] != 0 gets
 * L = clamp(round_nearest((x + dm[j]) / d[j]), lo, hi) + off; the others
 * keep the search's codes. */
void fx_kquant_requant_ref(const float *x, int nsub, int n, const float *d, const float *dm, int lo, int hi, int off,
                           uint8_t *L);

#endif
