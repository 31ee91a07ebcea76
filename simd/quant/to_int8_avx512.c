/*
 * to_int8_avx512.c — a bf16 weight row straight into the int8 rule's codes
 * (quant.h fx_int8_codes of the widened row, bit for bit), two passes over
 * the 2-byte source and no f32 row: --precision int8 makes the transformer's
 * int8 form at memory speed.
 *   1. max|x|: the largest |bf16| bit pattern (h & 0x7fff), 32 per vpmaxuw;
 *      for finite values the patterns order like the magnitudes, and a NaN
 *      or infinity pattern is larger than every finite one (the rule then
 *      gives zero codes, as fx_int8_codes does);
 *   2. code = round-to-nearest-even(x · (127/max)): the f32 product, then
 *      vcvtps2dq in the default rounding mode — the integer the scalar
 *      rule's 1.5·2^23 addition leaves (|x · inv| <= 127); vpmovdb narrows,
 *      the sum of codes in int32 lanes.
 * (SIMDe has every instruction used: the x86emu build runs this file.)
 */
#include "quant.h"

#include "simd/common/x86.h"

void fx_bf16_to_int8_avx512(const uint8_t *src, int64_t n, int8_t *q, float *scale, int32_t *sum) {
    const uint16_t *h = (const uint16_t *)(const void *)src;
    const __m512i magnitude = _mm512_set1_epi16(0x7fff);
    __m512i mx = _mm512_setzero_si512();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        mx = _mm512_max_epu16(mx, _mm512_and_si512(_mm512_loadu_si512((const void *)(h + i)), magnitude));
    if (i < n) {
        const __mmask32 tail = (__mmask32)((1ull << (n - i)) - 1);
        mx = _mm512_max_epu16(mx, _mm512_and_si512(_mm512_maskz_loadu_epi16(tail, h + i), magnitude));
    }
    /* the largest of the 32 lanes */
    __m256i m256 = _mm256_max_epu16(_mm512_castsi512_si256(mx), _mm512_extracti64x4_epi64(mx, 1));
    __m128i m128 = _mm_max_epu16(_mm256_castsi256_si128(m256), _mm256_extracti128_si256(m256, 1));
    m128 = _mm_max_epu16(m128, _mm_srli_si128(m128, 8));
    m128 = _mm_max_epu16(m128, _mm_srli_si128(m128, 4));
    m128 = _mm_max_epu16(m128, _mm_srli_si128(m128, 2));
    const float amax = fx_bf16_bits_to_f32((uint16_t)_mm_cvtsi128_si32(m128));
    if (fx_int8_zero_row(amax, n, q, scale, sum)) return;
    const float inv = 127.0f / amax;
    const __m512 vinv = _mm512_set1_ps(inv);
    __m512i acc = _mm512_setzero_si512();
    for (i = 0; i + 16 <= n; i += 16) {
        const __m512i w = _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const void *)(h + i))), 16);
        const __m512i c = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_castsi512_ps(w), vinv));
        _mm_storeu_si128((void *)(q + i), _mm512_cvtepi32_epi8(c));
        acc = _mm512_add_epi32(acc, c);
    }
    if (i < n) {
        const __mmask16 tail = (__mmask16)((1u << (n - i)) - 1);
        const __m512i w = _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(tail, h + i)), 16);
        /* lanes past n hold +0: code 0, nothing added to the sum */
        const __m512i c = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_castsi512_ps(w), vinv));
        int8_t last[16];
        _mm_storeu_si128((void *)last, _mm512_cvtepi32_epi8(c));
        memcpy(q + i, last, (size_t)(n - i));
        acc = _mm512_add_epi32(acc, c);
    }
    int32_t lanes[16], s = 0;
    _mm512_storeu_si512((void *)lanes, acc);
    for (int l = 0; l < 16; l++) s += lanes[l];
    *scale = amax / 127.0f, *sum = s;
}
