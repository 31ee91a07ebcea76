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


/* ---- fp8, 8 bytes as one ymm (the method of dequant_avx512.c, F16C) ---- */
static void dq_f8_e5m2_avx2(const uint8_t *x, int64_t n, float *y) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_slli_epi16(_mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)(const void *)(x + i))), 8);
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(h));
    }
    for (; i < n; i++) y[i] = fx_f8_e5m2_to_f32(x[i]);
}

static void dq_f8_e4m3_avx2(const uint8_t *x, int64_t n, float *y) {
    int64_t i = 0;
    const __m128i low7 = _mm_set1_epi16(0x7F), sign = _mm_set1_epi16(0x80);
    for (; i + 8 <= n; i += 8) {
        const __m128i w = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)(const void *)(x + i)));
        const __m128i h = _mm_or_si128(_mm_slli_epi16(_mm_and_si128(w, sign), 8), _mm_slli_epi16(_mm_and_si128(w, low7), 7));
        const __m256 f = _mm256_mul_ps(_mm256_cvtph_ps(h), _mm256_set1_ps(256.0f));
        const __m256 nan = _mm256_castsi256_ps(_mm256_cvtepi16_epi32(_mm_cmpeq_epi16(_mm_and_si128(w, low7), low7)));
        const __m256 qnan = _mm256_or_ps(_mm256_and_ps(f, _mm256_set1_ps(-0.0f)),
                                         _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000)));
        _mm256_storeu_ps(y + i, _mm256_blendv_ps(f, qnan, nan));
    }
    for (; i < n; i++) y[i] = fx_f8_e4m3_to_f32(x[i]);
}

FX_QUANT_DECLARE(avx2)

const fx_quant_kernels fx_quant_avx2 = {
    .name = "avx2",
    .quant = {FX_QUANT_ENTRIES(avx2)},
    .dequant = {FX_DQ_ENTRIES(DQ_F32), [FX_DTYPE_F8_E4M3] = dq_f8_e4m3_avx2, [FX_DTYPE_F8_E5M2] = dq_f8_e5m2_avx2},
    .to_int8 = {[FX_DTYPE_BF16] = fx_bf16_to_int8_avx2},
};
