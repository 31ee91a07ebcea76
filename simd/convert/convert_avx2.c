/*
 * convert_avx2.c — f32 ↔ bf16 / f16 for AVX2 + F16C, 8 elements a step,
 * bit-identical to the scalar reference (convert.c): bf16 rounding in
 * integer arithmetic, f16 through vcvtps2ph/vcvtph2ps (round to nearest
 * even, subnormals kept, NaN quiet with the top payload bits). Tails use
 * the scalar single-element functions.
 */
#include "simd/rowops/rowops.h"

#include "simd/common/x86.h"

void fx_bf16_to_f32_avx2(int64_t n, const uint16_t *src, float *dst) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(src + i)));
        _mm256_storeu_si256((__m256i *)(dst + i), _mm256_slli_epi32(w, 16));
    }
    for (; i < n; i++) dst[i] = fx_bf16_bits_to_f32(src[i]);
}

void fx_f32_to_bf16_avx2(int64_t n, const float *src, uint16_t *dst) {
    const __m256i bias = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1),
                  quiet = _mm256_set1_epi32(0x40);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(src + i);
        __m256i u = _mm256_castps_si256(v), hi = _mm256_srli_epi32(u, 16);
        __m256i r = _mm256_add_epi32(_mm256_add_epi32(u, bias), _mm256_and_si256(hi, one));
        r = _mm256_srli_epi32(r, 16);
        __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        r = _mm256_blendv_epi8(r, _mm256_or_si256(hi, quiet), nan);
        /* every lane is <= 0xffff: unsigned-saturating pack is exact */
        __m128i p = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
        _mm_storeu_si128((__m128i *)(dst + i), p);
    }
    for (; i < n; i++) dst[i] = fx_f32_to_bf16_bits(src[i]);
}

void fx_f16_to_f32_avx2(int64_t n, const uint16_t *src, float *dst) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    for (; i < n; i++) dst[i] = fx_f16_bits_to_f32(src[i]);
}

void fx_f32_to_f16_avx2(int64_t n, const float *src, uint16_t *dst) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    for (; i < n; i++) dst[i] = fx_f32_to_f16_bits(src[i]);
}
