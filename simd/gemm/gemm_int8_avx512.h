/*
 * gemm_int8_avx512.h — the write-back of one int8 tile on AVX-512, shared
 * by the AVX512-VNNI and AMX-INT8 kernels (AVX-512F only, so it compiles
 * under either file's flags). Element by element the operations of the
 * scalar reference (gemm_int8.c): v = acc·s_row, then + bias only when
 * there is one, then store / c + v / fma(gate, v, c).
 */
#ifndef FX_GEMM_INT8_AVX512_H
#define FX_GEMM_INT8_AVX512_H

#include "gemm_avx512_util.h"

/* acc [t->m][>= t->n] f32 block sums, rows ld floats apart. */
static inline void fx_int8_write_tile_avx512(const float *acc, int64_t ld, const fx_int8_tile *t) {
    for (int i = 0; i < t->m; i++) {
        const __m512 sr = _mm512_set1_ps(t->sa[i]);
        float *c = t->c + i * t->ldc;
        for (int j = 0; j < t->n; j += 16) {
            const __mmask16 k = fx_gemm_mask16(t->n - j);
            __m512 v = _mm512_mul_ps(_mm512_loadu_ps(acc + i * ld + j), sr);
            if (t->bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(k, t->bias + j));
            if (t->mode == FX_EPI_ACCUMULATE) v = _mm512_add_ps(_mm512_maskz_loadu_ps(k, c + j), v);
            else if (t->mode == FX_EPI_GATED_ACCUMULATE)
                v = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, t->gate + j), v, _mm512_maskz_loadu_ps(k, c + j));
            _mm512_mask_storeu_ps(c + j, k, v);
        }
    }
}

#endif
