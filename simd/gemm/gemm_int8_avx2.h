/*
 * gemm_int8_avx2.h — the epilogue of one int8 tile on AVX2, shared by the
 * AVX2 (vpmaddubsw) and AVX-VNNI (ymm vpdpbusd) kernels. As on AVX-512
 * (gemm_int8_avx512.h): the tile's int32 dots are channel-major in L1,
 * d[j][i]; 8 channels × 8 tokens at a time are transposed in registers so
 * that each token's outputs are one vector over channels; element by
 * element the operations of fx_int8_epi_c (gemm.h).
 */
#ifndef FX_GEMM_INT8_AVX2_H
#define FX_GEMM_INT8_AVX2_H

#include "gemm_int8.h"
#include "simd/common/x86.h"

/* Transpose 8×8 int32 held in r[0..7] (row i in r[i]; afterwards column j
 * in r[j]). */
static inline __attribute__((always_inline)) void fx_int8_transpose8x8(__m256i r[8]) {
    __m256i t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int g = 0; g < 8; g += 4) {
        u[g + 0] = _mm256_unpacklo_epi64(t[g], t[g + 2]);
        u[g + 1] = _mm256_unpackhi_epi64(t[g], t[g + 2]);
        u[g + 2] = _mm256_unpacklo_epi64(t[g + 1], t[g + 3]);
        u[g + 3] = _mm256_unpackhi_epi64(t[g + 1], t[g + 3]);
    }
    for (int c = 0; c < 4; c++) {
        r[c] = _mm256_permute2x128_si256(u[c], u[4 + c], 0x20);
        r[4 + c] = _mm256_permute2x128_si256(u[c], u[4 + c], 0x31);
    }
}

/* d [mr][ldd] int32 (mr <= 8, tokens in multiples of 8 up to ldd); u8: the
 * dots still hold 128·wsum[j]. */
static inline void fx_int8_finish_avx2(const int32_t *d, int mr, int64_t ldd, int u8, const fx_int8_tile *t) {
    const __m256i kn = _mm256_cmpgt_epi32(_mm256_set1_epi32(t->n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    const __m256 sw = _mm256_maskload_ps(t->sw, kn);
    const __m256i corr = u8 ? _mm256_slli_epi32(_mm256_castps_si256(_mm256_maskload_ps((const float *)t->wsum, kn)), 7)
                            : _mm256_setzero_si256();
    const __m256 bias = t->bias ? _mm256_maskload_ps(t->bias, kn) : _mm256_setzero_ps();
    const __m256 gate = t->mode == FX_EPI_GATED_ACCUMULATE ? _mm256_maskload_ps(t->gate, kn) : _mm256_setzero_ps();
    for (int i0 = 0; i0 < t->m; i0 += 8) {
        __m256i r[8];
        for (int c = 0; c < 8; c++)
            r[c] = c < mr ? _mm256_loadu_si256((const __m256i *)(const void *)(d + c * ldd + i0)) : _mm256_setzero_si256();
        fx_int8_transpose8x8(r);
        const int ni = t->m - i0 < 8 ? t->m - i0 : 8;
        for (int i = 0; i < ni; i++) {
            __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(r[i], corr)), sw);
            v = _mm256_mul_ps(v, _mm256_set1_ps(t->sx[i0 + i]));
            if (t->bias) v = _mm256_add_ps(v, bias);
            float *c = t->y + (i0 + i) * t->ldy;
            if (t->mode == FX_EPI_ACCUMULATE) v = _mm256_add_ps(_mm256_maskload_ps(c, kn), v);
            else if (t->mode == FX_EPI_GATED_ACCUMULATE) v = _mm256_fmadd_ps(gate, v, _mm256_maskload_ps(c, kn));
            _mm256_maskstore_ps(c, kn, v);
        }
    }
}

#endif
