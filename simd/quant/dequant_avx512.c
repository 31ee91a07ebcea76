/*
 * dequant_avx512.c — AVX-512 block dequantizers (dequant_blocks.h, 16
 * codes as one zmm), bit-identical to dequant.c, in two instances: f32
 * output, and bf16 output rounded in the register exactly as the row
 * table's f32 → bf16 (convert_avx512.c: integer round to nearest even,
 * NaN made quiet), which saves the GEMM's expansion a pass over an f32
 * staging row. Also the AVX-512 quant table.
 */
#include "quant.h"

#include "simd/common/x86.h"

typedef __m512 dqv;
static inline dqv dq_set1(float f) { return _mm512_set1_ps(f); }

static inline __m512 codes16(__m128i q) { return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)); }

/* ---- f32 output ---- */

static inline void put16_mul(__m128i q, __m512 d, float *y) { _mm512_storeu_ps(y, _mm512_mul_ps(codes16(q), d)); }
static inline void put16_mul_sub(__m128i q, __m512 d, __m512 m, float *y) {
    _mm512_storeu_ps(y, _mm512_sub_ps(_mm512_mul_ps(d, codes16(q)), m));
}
static inline void put16_mul_add(__m128i q, __m512 d, __m512 m, float *y) {
    _mm512_storeu_ps(y, _mm512_add_ps(_mm512_mul_ps(codes16(q), d), m));
}

#define DQ_OUT float
#define DQ_F32(name) name##_f32
#define DQ(name) DQ_F32(name)
#include "dequant_blocks.h"
#undef DQ
#undef DQ_OUT

/* ---- bf16 output ---- */

static inline void store_bf16(uint16_t *y, __m512 v) {
    __m512i u = _mm512_castps_si512(v), hi = _mm512_srli_epi32(u, 16);
    __m512i r = _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), _mm512_and_si512(hi, _mm512_set1_epi32(1)));
    r = _mm512_srli_epi32(r, 16);
    r = _mm512_mask_mov_epi32(r, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), _mm512_or_si512(hi, _mm512_set1_epi32(0x40)));
    _mm256_storeu_si256((__m256i *)(void *)y, _mm512_cvtepi32_epi16(r));
}

#undef put16_mul
#define put16_mul(q, d, y) store_bf16((y), _mm512_mul_ps(codes16(q), (d)))
#define put16_mul_sub(q, d, m, y) store_bf16((y), _mm512_sub_ps(_mm512_mul_ps((d), codes16(q)), (m)))
#define put16_mul_add(q, d, m, y) store_bf16((y), _mm512_add_ps(_mm512_mul_ps(codes16(q), (d)), (m)))
#define DQ_OUT uint16_t
#define DQ_BF16(name) name##_bf16
#define DQ(name) DQ_BF16(name)
#include "dequant_blocks.h"
#undef DQ
#undef DQ_OUT

/* ---- fp8, 16 bytes as one zmm (bit-identical to quant.h's decoders) ----
 * E5M2 is a half's upper byte: vcvtph2ps widens it exactly (NaNs quiet with
 * their payload, as fx_f16_bits_to_f32). E4M3FN's 7 low bits shifted into a
 * half's exponent and mantissa fields read 2⁻⁸ of the value (bias 15 for
 * 7; subnormals land on half subnormals), so ×256 is exact; 0x7F / 0xFF
 * become the quiet NaN the scalar decoder makes. (Instructions SIMDe's
 * emulation has: the x86emu build runs this file.) */
static void dq_f8_e5m2_avx512(const uint8_t *x, int64_t n, float *y) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i h = _mm256_slli_epi16(_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(x + i))), 8);
        _mm512_storeu_ps(y + i, _mm512_cvtph_ps(h));
    }
    for (; i < n; i++) y[i] = fx_f8_e5m2_to_f32(x[i]);
}

static void dq_f8_e4m3_avx512(const uint8_t *x, int64_t n, float *y) {
    int64_t i = 0;
    const __m256i low7 = _mm256_set1_epi16(0x7F), sign = _mm256_set1_epi16(0x80);
    for (; i + 16 <= n; i += 16) {
        const __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(x + i));
        const __m256i w = _mm256_cvtepu8_epi16(b);
        const __m256i h = _mm256_or_si256(_mm256_slli_epi16(_mm256_and_si256(w, sign), 8),
                                          _mm256_slli_epi16(_mm256_and_si256(w, low7), 7));
        __m512 f = _mm512_mul_ps(_mm512_cvtph_ps(h), _mm512_set1_ps(256.0f));
        /* 0x7F / 0xFF read ±1.875·2⁸ = ±480 here, which no finite E4M3 is (max 448) */
        const __mmask16 nan = _mm512_cmp_ps_mask(_mm512_andnot_ps(_mm512_set1_ps(-0.0f), f), _mm512_set1_ps(480.0f),
                                                 _CMP_EQ_OQ);
        const __m512 qnan = _mm512_or_ps(_mm512_and_ps(f, _mm512_set1_ps(-0.0f)),
                                         _mm512_castsi512_ps(_mm512_set1_epi32(0x7FC00000)));
        _mm512_storeu_ps(y + i, _mm512_mask_mov_ps(f, nan, qnan));
    }
    for (; i < n; i++) y[i] = fx_f8_e4m3_to_f32(x[i]);
}

FX_QUANT_DECLARE(avx512)

const fx_quant_kernels fx_quant_avx512 = {
    .name = "avx512",
    .dequant = {FX_DQ_ENTRIES(DQ_F32), [FX_DTYPE_F8_E4M3] = dq_f8_e4m3_avx512, [FX_DTYPE_F8_E5M2] = dq_f8_e5m2_avx512},
    .dequant_bf16 = {FX_DQ_ENTRIES(DQ_BF16)},
    .quant = {FX_QUANT_ENTRIES(avx512)},
    .to_int8 = {[FX_DTYPE_BF16] = fx_bf16_to_int8_avx512},
};
