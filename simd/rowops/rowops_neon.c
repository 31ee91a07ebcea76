/*
 * rowops_neon.c — the row-op family for aarch64 Advanced SIMD (4 lanes):
 * the kernels of rowops_simd.h, the GroupNorm channel sums in double, and
 * the table.
 */
#include "rowops.h"

#include <math.h>

#include "simd/common/vec_neon.h"
#include "rowops_simd.h"

/* per channel, pixels in order, in double (4 channels = 2×2 doubles) */
static void gn_sums_neon(int64_t pixels, int channels, const float *x, double *sum, double *sumsq) {
    for (int64_t p = 0; p < pixels; p++) {
        const float *row = x + p * channels;
        int c = 0;
        for (; c + 4 <= channels; c += 4) {
            float32x4_t v = vld1q_f32(row + c);
            float64x2_t lo = vcvt_f64_f32(vget_low_f32(v)), hi = vcvt_high_f64_f32(v);
            vst1q_f64(sum + c, vaddq_f64(vld1q_f64(sum + c), lo));
            vst1q_f64(sum + c + 2, vaddq_f64(vld1q_f64(sum + c + 2), hi));
            vst1q_f64(sumsq + c, vfmaq_f64(vld1q_f64(sumsq + c), lo, lo));
            vst1q_f64(sumsq + c + 2, vfmaq_f64(vld1q_f64(sumsq + c + 2), hi, hi));
        }
        for (; c < channels; c++) { /* x² is exact in double: FMA or not, same bits */
            double v = row[c];
            sum[c] += v;
            sumsq[c] += v * v;
        }
    }
}

const struct fx_row_kernels fx_row_neon = {
    .name = "neon (4 lanes, f32 sums, poly-6 exp)",
    .rmsnorm = rmsnorm_v,
    .layernorm_modulate = layernorm_modulate_v,
    .silu = silu_v,
    .swiglu = swiglu_v,
    .gated_add = gated_add_v,
    .softmax = softmax_v,
    .exp = exp_v,
    .gn_sums = gn_sums_neon,
    .gn_apply = gn_apply_v,
    .bf16_to_f32 = fx_bf16_to_f32_neon,
    .f32_to_bf16 = fx_f32_to_bf16_neon,
    .f16_to_f32 = fx_f16_to_f32_neon,
    .f32_to_f16 = fx_f32_to_f16_neon,
    .rope = fx_rope_neon,
};
