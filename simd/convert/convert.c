/*
 * convert.c — the parallel conversions between f32, bf16 and f16 (the
 * exact element rules are in float16.h); dtypes are in simd/quant/dtypes.c.
 */
#include "simd/rowops/rowops.h"

/* ---- scalar reference kernels (row table entries) ---------------------- */

void fx_bf16_to_f32_scalar(int64_t n, const uint16_t *src, float *dst) {
    for (int64_t i = 0; i < n; i++) dst[i] = fx_bf16_bits_to_f32(src[i]);
}
void fx_f32_to_bf16_scalar(int64_t n, const float *src, uint16_t *dst) {
    for (int64_t i = 0; i < n; i++) dst[i] = fx_f32_to_bf16_bits(src[i]);
}
void fx_f16_to_f32_scalar(int64_t n, const uint16_t *src, float *dst) {
    for (int64_t i = 0; i < n; i++) dst[i] = fx_f16_bits_to_f32(src[i]);
}
void fx_f32_to_f16_scalar(int64_t n, const float *src, uint16_t *dst) {
    for (int64_t i = 0; i < n; i++) dst[i] = fx_f32_to_f16_bits(src[i]);
}

/* ---- public, parallel over fixed spans ------------------------------- */

#define SPAN 16384

#define FX_CONVERT_PUBLIC(fn, entry, src_t, dst_t)                                   \
    void fn(const fx_kctx *kc, int64_t n, const src_t *src, dst_t *dst) {            \
        if (n <= 0) return;                                                          \
        const struct fx_row_kernels *rk = fx_row_table(kc);                          \
        int64_t spans = (n + SPAN - 1) / SPAN;                                       \
        _Pragma("omp parallel for schedule(static) num_threads(fx_row_threads(kc, n, 4 * FX_ROW_PARALLEL_MIN))") \
        for (int64_t s = 0; s < spans; s++) {                                        \
            int64_t i0 = s * SPAN, len = n - i0 < SPAN ? n - i0 : SPAN;              \
            rk->entry(len, src + i0, dst + i0);                                      \
        }                                                                            \
    }

FX_CONVERT_PUBLIC(fx_bf16_to_f32, bf16_to_f32, uint16_t, float)
FX_CONVERT_PUBLIC(fx_f32_to_bf16, f32_to_bf16, float, uint16_t)
FX_CONVERT_PUBLIC(fx_f16_to_f32, f16_to_f32, uint16_t, float)
FX_CONVERT_PUBLIC(fx_f32_to_f16, f32_to_f16, float, uint16_t)

void fx_to_f32(const fx_kctx *kc, int64_t n, const void *src, fx_dtype t, float *dst) {
    switch (t) {
    case FX_DTYPE_F32:
        if ((const float *)src != dst)
            for (int64_t i = 0; i < n; i++) dst[i] = ((const float *)src)[i];
        return;
    case FX_DTYPE_F16: fx_f16_to_f32(kc, n, src, dst); return;
    case FX_DTYPE_BF16: fx_bf16_to_f32(kc, n, src, dst); return;
    default: fx_dequantize(kc, t, 1, n, src, 0, dst); return;
    }
}
