/*
 * attention_bf16.h — bf16 packing shared by the attention variants whose
 * products take bf16 (attention_avx512bf16.c: vdpbf16ps; attention_amx.c:
 * tiles): pairs, Q as pairs of dims, and P as pairs of keys (their
 * STORE_PROBS for attention_simd.h, which is included after this file).
 * Needs AVX512_BF16 (vcvtne2ps2bf16); include after
 * attention_avx512_common.h.
 *
 * Pairs are uint32 holding two bf16 (the lower-index element in the low
 * half), rounded to nearest even.
 */
#ifndef FX_ATTENTION_BF16_H
#define FX_ATTENTION_BF16_H

#include <stdint.h>

/* bf16 pairs (a[i], b[i]) in lane i: round both to bf16 and interleave. */
static inline __m512i pair_bf16(__m512 a, __m512 b) {
    const __m512i ab = (__m512i)_mm512_cvtne2ps_pbh(b, a); /* a0..a15 b0..b15 */
    const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9,
                                         24, 8, 23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1,
                                         16, 0);
    return _mm512_permutexvar_epi16(idx, ab);
}

/* 32 consecutive floats times scale (n valid, zero beyond) → 32 bf16 in order. */
static inline __m512i row_bf16(const float *src, int n, __m512 scale) {
    const __m512 lo = _mm512_mul_ps(_mm512_maskz_loadu_ps(lanes(n), src), scale);
    const __m512 hi = _mm512_mul_ps(_mm512_maskz_loadu_ps(lanes(n - 16), src + 16), scale);
    return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
}

/* qp [pairs][R]: qp[i][r] = bf16 pair (Q[r][2i], Q[r][2i+1]) · qscale of
 * the task's row r (zero past d/2 and for padding rows r >= k->rows). The
 * rows are converted into tmp [R][ld] pairs (ld >= pairs rounded up to 16),
 * then transposed in 16×16 blocks. */
static void pack_q_pairs(const fx_attn_plan *p, const fx_attn_task *k, int R, int d, uint32_t *tmp, int ld,
                         uint32_t *qp, int pairs) {
    const __m512 qs = _mm512_set1_ps(p->qscale);
    for (int r = 0; r < k->rows && r < FX_ATTN_PF_ROWS; r++) fx_attn_prefetch_row(fx_attn_q_row(p, k, r), 4 * d, 0);
    for (int r = 0; r < R; r++) {
        uint32_t *tr = tmp + (size_t)r * (size_t)ld;
        if (r + FX_ATTN_PF_ROWS < k->rows) fx_attn_prefetch_row(fx_attn_q_row(p, k, r + FX_ATTN_PF_ROWS), 4 * d, 0);
        const float *q = r < k->rows ? fx_attn_q_row(p, k, r) : NULL;
        for (int i = 0; i < pairs; i += 16)
            _mm512_storeu_si512(tr + i, q ? row_bf16(q + 2 * i, d - 2 * i, qs) : _mm512_setzero_si512());
    }
    for (int r0 = 0; r0 < R; r0 += 16)
        for (int i0 = 0; i0 < pairs; i0 += 16)
            transpose16(tmp + (size_t)r0 * (size_t)ld + i0, (size_t)ld, qp + (size_t)i0 * R + r0, (size_t)R,
                        pairs - i0 < 16 ? pairs - i0 : 16);
}

/* P for the bf16 products: keys 2jp and 2jp+1 of rows rb..rb+15 as one
 * bf16 pair per lane, pp [KT/2][R]; the running sum l takes the unrounded
 * p (attention_simd.h). */
static inline void store_probs_bf16(const fx_attn_bufs *b, int jp, int rb, __m512 p0, __m512 p1) {
    _mm512_store_si512((uint32_t *)b->pp + (size_t)jp * b->R + rb, pair_bf16(p0, p1));
}
#define STORE_PROBS(b, jp, rb, s0, p0, p1) store_probs_bf16((b), (jp), (rb), (p0), (p1))

#endif
