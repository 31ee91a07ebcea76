/*
 * rowops_scalar.c — the scalar reference of the row-op family.
 *
 * Plain C, the definition every SIMD variant is tested against. Sums are
 * accumulated in double, sequentially; transcendentals come from libm.
 * Products and sums are written as separate statements so that no compiler
 * fuses them into FMAs (the build is ISO C11: -ffp-contract=off).
 */
#include "rowops.h"

#include <math.h>

static void rmsnorm_scalar(int64_t n, const float *x, const float *w, float eps, float *y) {
    double ss = 0.0;
    for (int64_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float r = (float)(1.0 / sqrt(ss / (double)n + eps));
    for (int64_t i = 0; i < n; i++) {
        float t = x[i] * r;
        y[i] = w ? t * w[i] : t;
    }
}

static void layernorm_modulate_scalar(int64_t n, const float *x, const float *shift,
                                      const float *scale, float eps, float *y) {
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += x[i];
    float mean = (float)(s / (double)n);
    double v = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)x[i] - mean;
        v += d * d;
    }
    float r = (float)(1.0 / sqrt(v / (double)n + eps));
    for (int64_t i = 0; i < n; i++) {
        float t = (x[i] - mean) * r;
        float m = t * (1.0f + scale[i]);
        y[i] = m + shift[i];
    }
}

static inline float silu1(float x) { return x / (1.0f + expf(-x)); }

static void silu_scalar(int64_t n, const float *x, float *y) {
    for (int64_t i = 0; i < n; i++) y[i] = silu1(x[i]);
}

static void swiglu_scalar(int64_t n, const float *gate, const float *up, float *out) {
    for (int64_t i = 0; i < n; i++) out[i] = silu1(gate[i]) * up[i];
}

static void gated_add_scalar(int64_t n, float *y, const float *gate, const float *x) {
    if (gate)
        for (int64_t i = 0; i < n; i++) {
            float t = gate[i] * x[i];
            y[i] += t;
        }
    else
        for (int64_t i = 0; i < n; i++) y[i] += x[i];
}

static void softmax_scalar(int64_t n, float *x) {
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - mx);
        s += x[i];
    }
    float inv = (float)(1.0 / s);
    for (int64_t i = 0; i < n; i++) x[i] *= inv;
}

static void exp_scalar(int64_t n, const float *x, float *y) {
    for (int64_t i = 0; i < n; i++) y[i] = expf(x[i]);
}

static void gn_sums_scalar(int64_t pixels, int channels, const float *x, double *sum,
                           double *sumsq) {
    for (int64_t p = 0; p < pixels; p++) {
        const float *row = x + p * channels;
        for (int c = 0; c < channels; c++) {
            double v = row[c];
            sum[c] += v;
            sumsq[c] += v * v; /* exact product: 24+24 bits < 53 */
        }
    }
}

static void gn_apply_scalar(int64_t pixels, int channels, const float *x, const float *mean,
                            const float *a, const float *beta, int silu, float *y) {
    for (int64_t p = 0; p < pixels; p++) {
        const float *xr = x + p * channels;
        float *yr = y + p * channels;
        for (int c = 0; c < channels; c++) {
            float t = (xr[c] - mean[c]) * a[c];
            float v = t + beta[c];
            yr[c] = silu ? silu1(v) : v;
        }
    }
}

const struct fx_row_kernels fx_row_scalar = {
    .name = "scalar (double sums, libm expf)",
    .rmsnorm = rmsnorm_scalar,
    .layernorm_modulate = layernorm_modulate_scalar,
    .silu = silu_scalar,
    .swiglu = swiglu_scalar,
    .gated_add = gated_add_scalar,
    .softmax = softmax_scalar,
    .exp = exp_scalar,
    .gn_sums = gn_sums_scalar,
    .gn_apply = gn_apply_scalar,
    .bf16_to_f32 = fx_bf16_to_f32_scalar,
    .f32_to_bf16 = fx_f32_to_bf16_scalar,
    .f16_to_f32 = fx_f16_to_f32_scalar,
    .f32_to_f16 = fx_f32_to_f16_scalar,
    .rope = fx_rope_scalar,
};
