/*
 * rowops_avx512.c — the row-op family for AVX-512 (16 lanes): the kernels
 * of rowops_simd.h, the GroupNorm channel sums in double, and the table
 * (also used by the avx512bf16 level: row ops have no bf16 variant).
 */
#include "rowops.h"

#include <math.h>

#include "simd/common/vec_avx512.h"
#include "rowops_simd.h"

/* per channel, pixels in order, in double (16 channels = 2×8 doubles) */
static void gn_sums_avx512(int64_t pixels, int channels, const float *x, double *sum, double *sumsq) {
    for (int64_t p = 0; p < pixels; p++) {
        const float *row = x + p * channels;
        int c = 0;
        for (; c + 16 <= channels; c += 16) {
            __m512 v = _mm512_loadu_ps(row + c);
            __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
            __m512d hi = _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1));
            _mm512_storeu_pd(sum + c, _mm512_add_pd(_mm512_loadu_pd(sum + c), lo));
            _mm512_storeu_pd(sum + c + 8, _mm512_add_pd(_mm512_loadu_pd(sum + c + 8), hi));
            _mm512_storeu_pd(sumsq + c, _mm512_fmadd_pd(lo, lo, _mm512_loadu_pd(sumsq + c)));
            _mm512_storeu_pd(sumsq + c + 8, _mm512_fmadd_pd(hi, hi, _mm512_loadu_pd(sumsq + c + 8)));
        }
        for (; c < channels; c++) { /* x² is exact in double: FMA or not, same bits */
            double v = row[c];
            sum[c] += v;
            sumsq[c] += v * v;
        }
    }
}

const struct fx_row_kernels fx_row_avx512 = {
    .name = "avx512 (16 lanes, f32 sums, poly-6 exp)",
    .rmsnorm = rmsnorm_v,
    .layernorm_modulate = layernorm_modulate_v,
    .silu = silu_v,
    .swiglu = swiglu_v,
    .gated_add = gated_add_v,
    .softmax = softmax_v,
    .exp = exp_v,
    .gn_sums = gn_sums_avx512,
    .gn_apply = gn_apply_v,
    .bf16_to_f32 = fx_bf16_to_f32_avx512,
    .f32_to_bf16 = fx_f32_to_bf16_avx512,
    .f16_to_f32 = fx_f16_to_f32_avx512,
    .f32_to_f16 = fx_f32_to_f16_avx512,
    .rope = fx_rope_avx512,
};
