/*
 * convert.c — dtypes and conversions between f32, bf16 and f16.
 *
 * All conversions are exact: widening is lossless; narrowing rounds to
 * nearest, ties to even, handles subnormals, overflows to ±inf and keeps
 * NaNs NaN (quiet bit set, top payload bits kept — what F16C's vcvtps2ph
 * and the NEON fcvt instructions do, so every ISA agrees bit for bit).
 */
#include "rowops.h"

size_t fx_dtype_size(fx_dtype t) {
    switch (t) {
    case FX_DTYPE_F32: return 4;
    case FX_DTYPE_F16: return 2;
    case FX_DTYPE_BF16: return 2;
    }
    return 0;
}

const char *fx_dtype_name(fx_dtype t) {
    switch (t) {
    case FX_DTYPE_F32: return "F32";
    case FX_DTYPE_F16: return "F16";
    case FX_DTYPE_BF16: return "BF16";
    }
    return "unknown";
}

static inline uint32_t f32_bits(float f) {
    union { float f; uint32_t u; } v = {.f = f};
    return v.u;
}
static inline float bits_f32(uint32_t u) {
    union { uint32_t u; float f; } v = {.u = u};
    return v.f;
}

float fx_f16_bits_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0x1f) /* inf, or NaN made quiet */
        return bits_f32(sign | 0x7f800000u | (mant ? 0x400000u | (mant << 13) : 0));
    if (exp == 0) {
        if (!mant) return bits_f32(sign);
        /* subnormal mant·2^-24: normalise so the leading 1 is bit 10 */
        int e = -14;
        while (!(mant & 0x400u)) {
            mant <<= 1;
            e--;
        }
        return bits_f32(sign | (uint32_t)(e + 127) << 23 | (mant & 0x3ffu) << 13);
    }
    return bits_f32(sign | (exp + 112) << 23 | mant << 13);
}

uint16_t fx_f32_to_f16_bits(float f) {
    uint32_t u = f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu)); /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to inf */
    if (a >= 0x38800000u) { /* normal half: rebias, round the 13 dropped bits */
        uint32_t r = a - (112u << 23);
        return (uint16_t)(sign | ((r + 0xfffu + ((r >> 13) & 1u)) >> 13));
    }
    if (a <= 0x33000000u) return sign; /* <= 2^-25: ties to even -> 0 */
    /* subnormal half: value in units of 2^-24 is m·2^(e−126), e in [102, 112] */
    uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u, s = 126 - e;
    uint32_t q = m >> s, rem = m & ((1u << s) - 1), half = 1u << (s - 1);
    if (rem > half || (rem == half && (q & 1u))) q++;
    return (uint16_t)(sign | q);
}

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
    }
}
