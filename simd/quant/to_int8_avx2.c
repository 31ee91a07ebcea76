/*
 * to_int8_avx2.c — a bf16 weight row straight into the int8 rule's codes,
 * the AVX2 twin of to_int8_avx512.c (same two passes, same results bit for
 * bit): vpmaxuw over the |bf16| patterns, then 8 codes per vcvtps2dq
 * (default rounding: to nearest even), narrowed 16 at a time with the two
 * saturating packs (codes are within ±127, nothing saturates).
 */
#include "quant.h"

#include "simd/common/x86.h"

static int32_t tail_code(uint16_t h, float inv) { /* the scalar rule of quant.h */
    const float t = fx_bf16_bits_to_f32(h) * inv + 12582912.0f;
    int32_t r;
    memcpy(&r, &t, 4);
    return r - 0x4b400000;
}

void fx_bf16_to_int8_avx2(const uint8_t *src, int64_t n, int8_t *q, float *scale, int32_t *sum) {
    const uint16_t *h = (const uint16_t *)(const void *)src;
    const __m256i magnitude = _mm256_set1_epi16(0x7fff);
    __m256i mx = _mm256_setzero_si256();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        mx = _mm256_max_epu16(mx, _mm256_and_si256(_mm256_loadu_si256((const void *)(h + i)), magnitude));
    __m128i m128 = _mm_max_epu16(_mm256_castsi256_si128(mx), _mm256_extracti128_si256(mx, 1));
    m128 = _mm_max_epu16(m128, _mm_srli_si128(m128, 8));
    m128 = _mm_max_epu16(m128, _mm_srli_si128(m128, 4));
    m128 = _mm_max_epu16(m128, _mm_srli_si128(m128, 2));
    uint16_t top = (uint16_t)_mm_cvtsi128_si32(m128);
    for (int64_t j = i; j < n; j++) top = (uint16_t)(h[j] & 0x7fff) > top ? (uint16_t)(h[j] & 0x7fff) : top;
    const float amax = fx_bf16_bits_to_f32(top);
    if (fx_int8_zero_row(amax, n, q, scale, sum)) return;
    const float inv = 127.0f / amax;
    const __m256 vinv = _mm256_set1_ps(inv);
    __m256i acc = _mm256_setzero_si256();
    for (i = 0; i + 16 <= n; i += 16) {
        const __m256i w = _mm256_loadu_si256((const void *)(h + i));
        const __m256i lo = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_castsi256_si128(w)), 16);
        const __m256i hi = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_extracti128_si256(w, 1)), 16);
        const __m256i a = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_castsi256_ps(lo), vinv));
        const __m256i b = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_castsi256_ps(hi), vinv));
        const __m256i w16 = _mm256_permute4x64_epi64(_mm256_packs_epi32(a, b), 0xD8); /* 16 int16 in order */
        _mm_storeu_si128((void *)(q + i), _mm_packs_epi16(_mm256_castsi256_si128(w16), _mm256_extracti128_si256(w16, 1)));
        acc = _mm256_add_epi32(acc, _mm256_add_epi32(a, b));
    }
    int32_t lanes[8], s = 0;
    _mm256_storeu_si256((void *)lanes, acc);
    for (int l = 0; l < 8; l++) s += lanes[l];
    for (; i < n; i++) {
        const int32_t c = tail_code(h[i], inv);
        q[i] = (int8_t)c;
        s += c;
    }
    *scale = amax / 127.0f, *sum = s;
}
