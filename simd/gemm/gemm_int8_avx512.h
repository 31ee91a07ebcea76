/*
 * gemm_int8_avx512.h — the epilogue of one int8 tile on AVX-512, shared by
 * the AVX512-VNNI and AMX-INT8 kernels (AVX-512F only, so it compiles
 * under either file's flags). The kernels end with the tile's int32 dots
 * channel-major in L1, d[j][i] (j channel, i token: vpdpbusd lanes and
 * AMX C rows run over tokens for one channel); 16 channels × 16 tokens at
 * a time are transposed in registers so that each token's outputs — a
 * contiguous piece of a row of y — are one vector over channels. Element
 * by element the operations of fx_int8_epi_c (gemm.h): v = (float)d · sw,
 * v · sx, + bias when there is one, then store / c + v / fma(gate, v, c).
 */
#ifndef FX_GEMM_INT8_AVX512_H
#define FX_GEMM_INT8_AVX512_H

#include "gemm_avx512_util.h"
#include "gemm_int8.h"

/* d [mr][ldd] int32 (mr <= 32, tokens in multiples of 16 up to ldd);
 * u8: the dots still hold 128·wsum[j]. */
static inline void fx_int8_finish_avx512(const int32_t *d, int mr, int64_t ldd, int u8, const fx_int8_tile *t) {
    for (int c0 = 0; c0 < mr && c0 < t->n; c0 += 16) {
        const __mmask16 kn = fx_gemm_mask16(t->n - c0);
        const __m512 sw = _mm512_maskz_loadu_ps(kn, t->sw + c0);
        const __m512i corr = u8 ? _mm512_slli_epi32(_mm512_castps_si512(_mm512_maskz_loadu_ps(kn, (const float *)(const void *)(t->wsum + c0))), 7) : _mm512_setzero_si512();
        const __m512 bias = t->bias ? _mm512_maskz_loadu_ps(kn, t->bias + c0) : _mm512_setzero_ps();
        const __m512 gate = t->gate && t->mode == FX_EPI_GATED_ACCUMULATE ? _mm512_maskz_loadu_ps(kn, t->gate + c0)
                                                                          : _mm512_setzero_ps();
        for (int i0 = 0; i0 < t->m; i0 += 16) {
            __m512i r[16];
#pragma GCC unroll 16
            for (int c = 0; c < 16; c++)
                r[c] = c0 + c < mr ? _mm512_loadu_si512(d + (c0 + c) * ldd + i0) : _mm512_setzero_si512();
            fx_gemm_transpose16x16(r);
            const int ni = t->m - i0 < 16 ? t->m - i0 : 16;
            for (int i = 0; i < ni; i++) {
                __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(r[i], corr)), sw);
                v = _mm512_mul_ps(v, _mm512_set1_ps(t->sx[i0 + i]));
                if (t->bias) v = _mm512_add_ps(v, bias);
                float *c = t->y + (i0 + i) * t->ldy + c0;
                if (t->mode == FX_EPI_ACCUMULATE) v = _mm512_add_ps(_mm512_maskz_loadu_ps(kn, c), v);
                else if (t->mode == FX_EPI_GATED_ACCUMULATE) v = _mm512_fmadd_ps(gate, v, _mm512_maskz_loadu_ps(kn, c));
                _mm512_mask_storeu_ps(c, kn, v);
            }
        }
    }
}

#endif
