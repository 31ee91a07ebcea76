/*
 * dequant_avx2.c — AVX2 block dequantizers (dequant_blocks.h, 16 codes as
 * two ymm of floats), bit-identical to dequant.c, and the AVX2 table.
 */
#include "quant.h"

#include "simd/common/x86.h"

/* ------------------------------------------------------------------------ */
/* Helpers: 16 int8 codes (one xmm) → 16 floats                             */
/* ------------------------------------------------------------------------ */

/* y[0..15] = (float)q · d */
static inline void put16_mul(__m128i q, __m256 d, float *y) {
    __m256 a = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q));
    __m256 b = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q, 8)));
    _mm256_storeu_ps(y, _mm256_mul_ps(a, d));
    _mm256_storeu_ps(y + 8, _mm256_mul_ps(b, d));
}

/* y[0..15] = d · (float)q (the reference's operand order; same product) − m */
static inline void put16_mul_sub(__m128i q, __m256 d, __m256 m, float *y) {
    __m256 a = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q));
    __m256 b = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q, 8)));
    _mm256_storeu_ps(y, _mm256_sub_ps(_mm256_mul_ps(d, a), m));
    _mm256_storeu_ps(y + 8, _mm256_sub_ps(_mm256_mul_ps(d, b), m));
}

/* y[0..15] = (float)q · d + m */
static inline void put16_mul_add(__m128i q, __m256 d, __m256 m, float *y) {
    __m256 a = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q));
    __m256 b = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q, 8)));
    _mm256_storeu_ps(y, _mm256_add_ps(_mm256_mul_ps(a, d), m));
    _mm256_storeu_ps(y + 8, _mm256_add_ps(_mm256_mul_ps(b, d), m));
}

typedef __m256 dqv;
static inline dqv dq_set1(float f) { return _mm256_set1_ps(f); }
#define DQ_OUT float
#define DQ(name) DQ_F32(name)
#define DQ_F32(name) name##_f32
#include "dequant_blocks.h"
#undef DQ
#undef DQ_OUT


FX_QUANT_DECLARE(avx2)

const fx_quant_kernels fx_quant_avx2 = {
    .name = "avx2",
    .quant = {FX_QUANT_ENTRIES(avx2)},
    .dequant = {FX_DQ_ENTRIES(DQ_F32)},
};
