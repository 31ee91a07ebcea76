/*
 * gemm_avx512_util.h — AVX-512 helpers of the gemm paths that run on
 * AVX-512 (gemm_avx512.c, gemm_avx512bf16.c, gemm_amx.c): the in-register
 * 16×16 transpose used by packing, the fused write-back of one tile row,
 * and lane masks. AVX-512F only, so it compiles under any of their flags.
 */
#ifndef FX_GEMM_AVX512_UTIL_H
#define FX_GEMM_AVX512_UTIL_H

#include "gemm.h"
#include "simd/common/x86.h"

/* Transpose a 16×16 block of 32-bit elements held in r[0..15] (row i in
 * r[i]; afterwards column j in r[j]): unpack 32-bit, unpack 64-bit, then
 * two rounds of 128-bit lane shuffles (64 shuffles). */
static inline __attribute__((always_inline)) void fx_gemm_transpose16x16(__m512i r[16]) {
    __m512i t[16], u[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
#pragma GCC unroll 16
    for (int g = 0; g < 16; g += 4) { /* u[g + c] lane l = rows g..g+3 at column 4l + c */
        u[g + 0] = _mm512_unpacklo_epi64(t[g], t[g + 2]);
        u[g + 1] = _mm512_unpackhi_epi64(t[g], t[g + 2]);
        u[g + 2] = _mm512_unpacklo_epi64(t[g + 1], t[g + 3]);
        u[g + 3] = _mm512_unpackhi_epi64(t[g + 1], t[g + 3]);
    }
#pragma GCC unroll 16
    for (int c = 0; c < 4; c++) {
        __m512i v0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x44), v1 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xEE);
        __m512i w0 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x44),
                w1 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xEE);
        r[c] = _mm512_shuffle_i32x4(v0, w0, 0x88);
        r[4 + c] = _mm512_shuffle_i32x4(v0, w0, 0xDD);
        r[8 + c] = _mm512_shuffle_i32x4(v1, w1, 0x88);
        r[12 + c] = _mm512_shuffle_i32x4(v1, w1, 0xDD);
    }
}

/* Write back row i of a tile held as two vectors of 16 columns (columns
 * masked by k0, k1); b0/b1 bias, g0/g1 gate (see fx_gemm_tile). */
static inline __attribute__((always_inline)) void fx_gemm_write_row(const fx_gemm_tile *t, int i, __m512 v0, __m512 v1,
                                                            __mmask16 k0, __mmask16 k1, __m512 b0, __m512 b1,
                                                            __m512 g0, __m512 g1) {
    if (i >= t->m) return;
    float *c = t->c + i * t->ldc;
    if (t->last) {
        v0 = _mm512_add_ps(v0, b0), v1 = _mm512_add_ps(v1, b1);
        if (t->mode == FX_EPI_ACCUMULATE) {
            v0 = _mm512_add_ps(_mm512_maskz_loadu_ps(k0, c), v0);
            v1 = _mm512_add_ps(_mm512_maskz_loadu_ps(k1, c + 16), v1);
        } else if (t->mode == FX_EPI_GATED_ACCUMULATE) {
            v0 = _mm512_fmadd_ps(g0, v0, _mm512_maskz_loadu_ps(k0, c));
            v1 = _mm512_fmadd_ps(g1, v1, _mm512_maskz_loadu_ps(k1, c + 16));
        }
    }
    _mm512_mask_storeu_ps(c, k0, v0);
    _mm512_mask_storeu_ps(c + 16, k1, v1);
}

/* Lanes [0, n) of a 16-lane mask (n may be <= 0 or >= 16). */
static inline __mmask16 fx_gemm_mask16(int64_t n) {
    return n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1);
}
/* Lanes [0, n) of a 32-lane mask. */
static inline __mmask32 fx_gemm_mask32(int64_t n) {
    return n >= 32 ? (__mmask32)0xFFFFFFFFu : n <= 0 ? (__mmask32)0 : (__mmask32)((1u << n) - 1);
}

#endif
