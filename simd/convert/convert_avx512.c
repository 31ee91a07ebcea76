/*
 * convert_avx512.c — f32 ↔ bf16 / f16 for AVX-512, 16 elements a step,
 * bit-identical to the scalar reference (convert.c): bf16 rounding is done
 * in integer arithmetic (vcvtneps2bf16 would flush subnormals), f16 uses
 * vcvtps2ph/vcvtph2ps (round to nearest even, subnormals kept, NaN quiet
 * with the top payload bits — the same rule as fx_f32_to_f16_bits).
 * Tails use the scalar single-element functions.
 */
#include "simd/rowops/rowops.h"

#include "simd/common/x86.h"

void fx_bf16_to_f32_avx512(int64_t n, const uint16_t *src, float *dst) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(src + i)));
        _mm512_storeu_si512((void *)(dst + i), _mm512_slli_epi32(w, 16));
    }
    for (; i < n; i++) dst[i] = fx_bf16_bits_to_f32(src[i]);
}

void fx_f32_to_bf16_avx512(int64_t n, const float *src, uint16_t *dst) {
    const __m512i bias = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1),
                  quiet = _mm512_set1_epi32(0x40);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_loadu_ps(src + i);
        __m512i u = _mm512_castps_si512(v), hi = _mm512_srli_epi32(u, 16);
        __m512i r = _mm512_add_epi32(_mm512_add_epi32(u, bias), _mm512_and_si512(hi, one));
        r = _mm512_srli_epi32(r, 16);
        __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(hi, quiet));
        _mm256_storeu_si256((__m256i *)(dst + i), _mm512_cvtepi32_epi16(r));
    }
    for (; i < n; i++) dst[i] = fx_f32_to_bf16_bits(src[i]);
}

void fx_f16_to_f32_avx512(int64_t n, const uint16_t *src, float *dst) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + i))));
    for (; i < n; i++) dst[i] = fx_f16_bits_to_f32(src[i]);
}

void fx_f32_to_f16_avx512(int64_t n, const float *src, uint16_t *dst) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(dst + i),
                            _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    for (; i < n; i++) dst[i] = fx_f32_to_f16_bits(src[i]);
}
