/*
 * fp8_encode.c — f32 → fp8 (F8_E4M3 / F8_E5M2) codes, the inverse of the
 * decoders in quant.h, and ComfyUI's per-tensor scaled rows (kernels.h).
 *
 * Integer rounding on the f32 bits u of |x| (m mantissa bits, bias b):
 *   - |x| >= the largest finite value (E4M3FN 0x7E = 448, E5M2 0x7B =
 *     57344; infinity too): that code (saturation, never NaN/infinity);
 *   - normal results (|x| >= 2^(1−b)): the f32 exponent and top m mantissa
 *     bits, rounded to nearest even by adding half an fp8 ulp minus one
 *     plus the kept lowest bit before the shift (a carry moves into the
 *     exponent, as it should), then rebiased: code = (u' >> (23 − m)) −
 *     ((127 − b) << m);
 *   - subnormal results: |x| rounded to a multiple of 2^(1−b−m) by the f32
 *     adder itself (adding 2^(23+1−b−m), whose ulp that is, in the default
 *     round-to-nearest-even mode), the code being the ulps added.
 * NaN gives the NaN code 0x7F (both formats) with x's sign.
 */
#include "quant.h"

#include "simd/kernels.h"

/* Branch-free (the row loop vectorizes): every case computed, then chosen. */
static inline uint8_t encode(float x, int mbits, int bias, uint32_t top, uint32_t max_bits, float sub_magic) {
    uint32_t u, sb, mb;
    memcpy(&u, &x, 4);
    const uint32_t sign = u >> 24 & 0x80;
    u &= 0x7FFFFFFFu;
    const int shift = 23 - mbits;
    const uint32_t normal = ((u + ((1u << (shift - 1)) - 1) + ((u >> shift) & 1)) >> shift) -
                            ((uint32_t)(127 - bias) << mbits);
    float a;
    memcpy(&a, &u, 4);
    const float s = a + sub_magic; /* rounds |x| to the subnormal step */
    memcpy(&sb, &s, 4);
    memcpy(&mb, &sub_magic, 4);
    /* selects as masks (no branches: the loop vectorizes) */
    const uint32_t is_sub = 0u - (uint32_t)(u < (uint32_t)(128 - bias) << 23); /* exponent < 1 − bias */
    const uint32_t is_sat = 0u - (uint32_t)(u >= max_bits);                     /* infinity too */
    const uint32_t is_nan = 0u - (uint32_t)(u > 0x7F800000u);
    uint32_t code = ((sb - mb) & is_sub) | (normal & ~is_sub);
    code = (top & is_sat) | (code & ~is_sat);
    code = (0x7Fu & is_nan) | (code & ~is_nan);
    return (uint8_t)(sign | code);
}

uint8_t fx_f32_to_fp8(fx_dtype t, float x) {
    /* 448 = 0x43E00000, 57344 = 0x47600000; subnormal steps 2^-9 (magic
     * 2^14) and 2^-16 (magic 2^7) */
    return t == FX_DTYPE_F8_E5M2 ? encode(x, 2, 15, 0x7B, 0x47600000u, 128.0f)
                                 : encode(x, 3, 7, 0x7E, 0x43E00000u, 16384.0f);
}

float fx_fp8_max(fx_dtype t) { return t == FX_DTYPE_F8_E5M2 ? 57344.0f : 448.0f; }

void fx_fp8_quantize_row(fx_dtype t, const float *x, int64_t n, float scale, uint8_t *dst) {
    if (t == FX_DTYPE_F8_E5M2) {
#pragma omp simd
        for (int64_t i = 0; i < n; i++) dst[i] = encode(x[i] / scale, 2, 15, 0x7B, 0x47600000u, 128.0f);
    } else {
#pragma omp simd
        for (int64_t i = 0; i < n; i++) dst[i] = encode(x[i] / scale, 3, 7, 0x7E, 0x43E00000u, 16384.0f);
    }
}
