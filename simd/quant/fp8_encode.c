/*
 * fp8_encode.c — f32 → fp8 (F8_E4M3 / F8_E5M2) codes, the inverse of the
 * decoders in quant.h, and ComfyUI's per-tensor scaled rows (kernels.h).
 *
 * One rule for both formats (m mantissa bits, exponent bias b, smallest
 * normal exponent emin = 1 − b): in binade E = max(floor(log2|x|), emin)
 * the codes are spaced q = 2^(E − m) apart, and code ((E − emin) << m) + r
 * with r = |x|/q rounded to nearest even is the nearest code (r counts from
 * the binade's start, so r = 2^(m+1) carries into the next binade and the
 * subnormals, E = emin, need no special case). |x|/q is exact (a power of
 * two), so the only rounding is rint's. Codes past the largest finite one
 * (E4M3FN 0x7E = 448, E5M2 0x7B = 57344) saturate to it, infinities
 * too; NaN stays NaN (callers check for non-finite values first).
 */
#include "quant.h"

#include <math.h>

#include "simd/kernels.h"

/* The nearest code of |x| (finite), without the sign. */
static uint32_t magnitude_code(float a, int mbits, int bias, uint32_t top) {
    uint32_t bits;
    memcpy(&bits, &a, 4);
    const int emin = 1 - bias;
    int e = (int)(bits >> 23) - 127; /* f32 subnormals: −127, below emin */
    if (e < emin) e = emin;
    if (e > 15) return top; /* far beyond both ranges (and infinity): saturate */
    const float r = rintf(ldexpf(a, mbits - e)); /* default rounding: nearest even; r <= 2^(m+1) */
    const uint32_t code = ((uint32_t)(e - emin) << mbits) + (uint32_t)r;
    return code > top ? top : code;
}

uint8_t fx_f32_to_fp8(fx_dtype t, float x) {
    uint32_t bits;
    memcpy(&bits, &x, 4);
    const uint8_t sign = (uint8_t)(bits >> 24 & 0x80);
    const float a = fabsf(x);
    if (a != a) return (uint8_t)(sign | 0x7F); /* NaN stays NaN (0x7F is NaN in both formats) */
    const uint32_t code = t == FX_DTYPE_F8_E5M2 ? magnitude_code(a, 2, 15, 0x7B) : magnitude_code(a, 3, 7, 0x7E);
    return (uint8_t)(sign | code);
}

float fx_fp8_max(fx_dtype t) { return t == FX_DTYPE_F8_E5M2 ? 57344.0f : 448.0f; }

void fx_fp8_quantize_row(fx_dtype t, const float *x, int64_t n, float scale, uint8_t *dst) {
    for (int64_t i = 0; i < n; i++) dst[i] = fx_f32_to_fp8(t, x[i] / scale);
}
