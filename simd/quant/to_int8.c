/*
 * to_int8.c — weight rows into the int8 form of the W8A8 GEMM
 * (fx_weight_to_int8): 32 int8 codes and one f32 scale per 32 elements.
 *
 * Types whose values already are code × block scale with |code| <= 127
 * convert exactly (a Q8_0 code −128, which ggml never writes, becomes −127) (Q8_0: q·d; Q4_0: (q − 8)·d; Q5_0: (q − 16)·d; IQ4_NL:
 * K[q]·d, the grid spans −127..113). Every other type is dequantized with
 * the reference rules and requantized per 32 elements like Q8_0 but with
 * an f32 scale and round-to-nearest-even codes.
 */
#include "quant.h"

#include <math.h>

static inline int rne(float v) { /* round half to even, |v| <= 2^22 */
    float t = v + 12582912.0f;
    uint32_t u;
    memcpy(&u, &t, 4);
    return (int)(u & 0x007fffffu) - 0x00400000;
}

/* 32 f32 values → codes and scale. */
static void requant32(const float *x, int8_t *q, float *d) {
    float amax = 0.0f;
    for (int j = 0; j < 32; j++) amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
    if (!(amax > 0.0f) || !isfinite(amax)) { /* zeros (or non-finite: zeros too) */
        memset(q, 0, 32);
        *d = 0.0f;
        return;
    }
    const float inv = 127.0f / amax;
    for (int j = 0; j < 32; j++) {
        int v = rne(x[j] * inv);
        q[j] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
    }
    *d = amax / 127.0f;
}

void fx_weight_to_int8(const fx_kctx *kc, fx_dtype t, const void *src, int64_t n, int8_t *q, float *d) {
    const uint8_t *b = src;
    const int64_t nb = n / 32;
    switch (t) {
    case FX_DTYPE_Q8_0:
        for (int64_t i = 0; i < nb; i++, b += 34) {
            d[i] = fx_q_f16(b);
            for (int j = 0; j < 32; j++) { /* ggml never writes −128; read it as −127 (the kernels' range) */
                int8_t v = (int8_t)b[2 + j];
                q[32 * i + j] = v == -128 ? -127 : v;
            }
        }
        return;
    case FX_DTYPE_Q4_0:
    case FX_DTYPE_IQ4_NL:
        for (int64_t i = 0; i < nb; i++, b += 18) {
            d[i] = fx_q_f16(b);
            int8_t *o = q + 32 * i;
            for (int j = 0; j < 16; j++) {
                int lo = b[2 + j] & 15, hi = b[2 + j] >> 4;
                o[j] = (int8_t)(t == FX_DTYPE_Q4_0 ? lo - 8 : fx_iq4nl_values[lo]);
                o[j + 16] = (int8_t)(t == FX_DTYPE_Q4_0 ? hi - 8 : fx_iq4nl_values[hi]);
            }
        }
        return;
    case FX_DTYPE_Q5_0:
        for (int64_t i = 0; i < nb; i++, b += 22) {
            d[i] = fx_q_f16(b);
            const uint32_t qh = fx_q_u32(b + 2);
            for (int j = 0; j < 32; j++) {
                int nib = j < 16 ? b[6 + j] & 15 : b[6 + j - 16] >> 4;
                q[32 * i + j] = (int8_t)((nib | (int)((qh >> j) & 1) << 4) - 16);
            }
        }
        return;
    default: { /* through f32, one super-block (or 32-block) at a time */
        const fx_dequant_fn fn = fx_quant_dequant_fn(kc ? kc->k : NULL, t);
        const int64_t bl = fx_dtype_block(t) > 32 ? fx_dtype_block(t) : 32;
        float x[256];
        for (int64_t e = 0; e < n; e += bl) {
            if (fn) fn(b + fx_dtype_row_bytes(t, e), bl / fx_dtype_block(t), x);
            else fx_dequantize_row(t, b + fx_dtype_row_bytes(t, e), bl, x);
            for (int64_t s = 0; s < bl; s += 32) requant32(x + s, q + e + s, d + (e + s) / 32);
        }
        return;
    }
    }
}
