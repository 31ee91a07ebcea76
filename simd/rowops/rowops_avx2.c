/*
 * rowops_avx2.c — the row-op family for AVX2 + FMA (8 lanes): the kernels
 * of rowops_simd.h, the GroupNorm channel sums in double, and the table.
 */
#include "rowops.h"

#include <math.h>

#include "simd/common/vec_avx2.h"
#include "rowops_simd.h"

/* per channel, pixels in order, in double (8 channels = 2×4 doubles) */
static void gn_sums_avx2(int64_t pixels, int channels, const float *x, double *sum, double *sumsq) {
    for (int64_t p = 0; p < pixels; p++) {
        const float *row = x + p * channels;
        int c = 0;
        for (; c + 8 <= channels; c += 8) {
            __m256 v = _mm256_loadu_ps(row + c);
            __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
            __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
            _mm256_storeu_pd(sum + c, _mm256_add_pd(_mm256_loadu_pd(sum + c), lo));
            _mm256_storeu_pd(sum + c + 4, _mm256_add_pd(_mm256_loadu_pd(sum + c + 4), hi));
            _mm256_storeu_pd(sumsq + c, _mm256_fmadd_pd(lo, lo, _mm256_loadu_pd(sumsq + c)));
            _mm256_storeu_pd(sumsq + c + 4, _mm256_fmadd_pd(hi, hi, _mm256_loadu_pd(sumsq + c + 4)));
        }
        for (; c < channels; c++) { /* x² is exact in double: FMA or not, same bits */
            double v = row[c];
            sum[c] += v;
            sumsq[c] += v * v;
        }
    }
}

const struct fx_row_kernels fx_row_avx2 = {
    .name = "avx2 (8 lanes, f32 sums, poly-6 exp)",
    .rmsnorm = rmsnorm_v,
    .layernorm_modulate = layernorm_modulate_v,
    .silu = silu_v,
    .swiglu = swiglu_v,
    .gated_add = gated_add_v,
    .softmax = softmax_v,
    .exp = exp_v,
    .gn_sums = gn_sums_avx2,
    .gn_apply = gn_apply_v,
    .bf16_to_f32 = fx_bf16_to_f32_avx2,
    .f32_to_bf16 = fx_f32_to_bf16_avx2,
    .f16_to_f32 = fx_f16_to_f32_avx2,
    .f32_to_f16 = fx_f32_to_f16_avx2,
    .rope = fx_rope_avx2,
};
