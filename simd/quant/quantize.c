/*
 * quantize.c — reference quantizers of the 32-element block types and the
 * fx_quantize_row / fx_quantize entry points (K-quants: quantize_k.c).
 *
 * Bit-identical to ggml's quantize_row_{q8_0,q4_0,q4_1,q5_0,q5_1}_ref: the
 * same f32 operations in the same order — the scale from the block's
 * extreme value, its reciprocal (never the rounded f16 scale) multiplying
 * each element, then truncation (Q4/Q5: +8.5, +16.5 or +0.5 then toward
 * zero) or roundf (Q8_0, half away from zero). Scales are stored as f16
 * rounded to nearest even. Built with -ffp-contract=off.
 */
#include "quant_ref.h"

#include <float.h>
#include <math.h>

/* The element of largest magnitude (the first one on ties), with its sign. */
static float signed_absmax(const float *x, int n) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++)
        if (amax < fabsf(x[j])) amax = fabsf(x[j]), max = x[j];
    return max;
}

static void min_max(const float *x, int n, float *mn, float *mx) {
    float lo = FLT_MAX, hi = -FLT_MAX;
    for (int j = 0; j < n; j++) {
        if (x[j] < lo) lo = x[j];
        if (x[j] > hi) hi = x[j];
    }
    *mn = lo, *mx = hi;
}

static void q_q8_0(const float *x, int64_t nb, uint8_t *b) {
    for (int64_t i = 0; i < nb; i++, x += 32, b += 34) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]);
        const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        fx_q_put_f16(b, d);
        for (int j = 0; j < 32; j++) b[2 + j] = (uint8_t)(int8_t)roundf(x[j] * id);
    }
}

static void q_q4_0(const float *x, int64_t nb, uint8_t *b) {
    for (int64_t i = 0; i < nb; i++, x += 32, b += 18) {
        const float d = signed_absmax(x, 32) / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        fx_q_put_f16(b, d);
        for (int j = 0; j < 16; j++) {
            int lo = (int8_t)(x[j] * id + 8.5f), hi = (int8_t)(x[j + 16] * id + 8.5f);
            b[2 + j] = (uint8_t)((unsigned)(lo < 15 ? lo : 15) | (unsigned)(hi < 15 ? hi : 15) << 4);
        }
    }
}

static void q_q4_1(const float *x, int64_t nb, uint8_t *b) {
    for (int64_t i = 0; i < nb; i++, x += 32, b += 20) {
        float mn, mx;
        min_max(x, 32, &mn, &mx);
        const float d = (mx - mn) / 15.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        fx_q_put_f16(b, d);
        fx_q_put_f16(b + 2, mn);
        for (int j = 0; j < 16; j++) {
            int lo = (int8_t)((x[j] - mn) * id + 0.5f), hi = (int8_t)((x[j + 16] - mn) * id + 0.5f);
            b[4 + j] = (uint8_t)((unsigned)(lo < 15 ? lo : 15) | (unsigned)(hi < 15 ? hi : 15) << 4);
        }
    }
}

/* Q5 packing: low nibbles into qs (element j | element j + 16 << 4), the
 * 5th bits into qh bit j. */
static void put_q5(const uint8_t q[32], uint8_t *qh_bytes, uint8_t *qs) {
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t)((q[j] & 15) | (q[j + 16] & 15) << 4);
        qh |= (uint32_t)(q[j] >> 4 & 1) << j | (uint32_t)(q[j + 16] >> 4 & 1) << (j + 16);
    }
    memcpy(qh_bytes, &qh, 4);
}

static void q_q5_0(const float *x, int64_t nb, uint8_t *b) {
    for (int64_t i = 0; i < nb; i++, x += 32, b += 22) {
        const float d = signed_absmax(x, 32) / -16.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        fx_q_put_f16(b, d);
        uint8_t q[32];
        for (int j = 0; j < 32; j++) {
            int v = (int8_t)(x[j] * id + 16.5f);
            q[j] = (uint8_t)(v < 31 ? v : 31);
        }
        put_q5(q, b + 2, b + 6);
    }
}

static void q_q5_1(const float *x, int64_t nb, uint8_t *b) {
    for (int64_t i = 0; i < nb; i++, x += 32, b += 24) {
        float mn, mx;
        min_max(x, 32, &mn, &mx);
        const float d = (mx - mn) / 31.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        fx_q_put_f16(b, d);
        fx_q_put_f16(b + 2, mn);
        uint8_t q[32];
        for (int j = 0; j < 32; j++) q[j] = (uint8_t)((x[j] - mn) * id + 0.5f); /* no clamp, as ggml */
        put_q5(q, b + 4, b + 8);
    }
}

/* F32 / F16 / BF16 "quantization": plain stores. */
static void q_f32(const float *x, int64_t n, uint8_t *b) { memcpy(b, x, (size_t)n * 4); }
static void q_f16(const float *x, int64_t n, uint8_t *b) {
    for (int64_t i = 0; i < n; i++) fx_q_put_f16(b + 2 * i, x[i]);
}
static void q_bf16(const float *x, int64_t n, uint8_t *b) {
    for (int64_t i = 0; i < n; i++) {
        uint16_t h = fx_f32_to_bf16_bits(x[i]);
        b[2 * i] = (uint8_t)h, b[2 * i + 1] = (uint8_t)(h >> 8);
    }
}

static void q_q2_k(const float *x, int64_t nb, uint8_t *b) { fx_quant_ref_k(FX_DTYPE_Q2_K, x, nb, b); }
static void q_q3_k(const float *x, int64_t nb, uint8_t *b) { fx_quant_ref_k(FX_DTYPE_Q3_K, x, nb, b); }
static void q_q4_k(const float *x, int64_t nb, uint8_t *b) { fx_quant_ref_k(FX_DTYPE_Q4_K, x, nb, b); }
static void q_q5_k(const float *x, int64_t nb, uint8_t *b) { fx_quant_ref_k(FX_DTYPE_Q5_K, x, nb, b); }
static void q_q6_k(const float *x, int64_t nb, uint8_t *b) { fx_quant_ref_k(FX_DTYPE_Q6_K, x, nb, b); }

/* By dtype: the reference quantizer of nb blocks (elements for F32/F16/BF16). */
static const fx_quant_fn quantizers[FX_DTYPE_COUNT] = {
    [FX_DTYPE_F32] = q_f32,   [FX_DTYPE_F16] = q_f16,   [FX_DTYPE_BF16] = q_bf16,
    [FX_DTYPE_Q8_0] = q_q8_0, [FX_DTYPE_Q4_0] = q_q4_0, [FX_DTYPE_Q4_1] = q_q4_1,
    [FX_DTYPE_Q5_0] = q_q5_0, [FX_DTYPE_Q5_1] = q_q5_1, [FX_DTYPE_Q2_K] = q_q2_k,
    [FX_DTYPE_Q3_K] = q_q3_k, [FX_DTYPE_Q4_K] = q_q4_k, [FX_DTYPE_Q5_K] = q_q5_k, [FX_DTYPE_Q6_K] = q_q6_k,
};

int fx_dtype_can_quantize(fx_dtype t) { return (unsigned)t < FX_DTYPE_COUNT && quantizers[t] != NULL; }

void fx_quantize_row(fx_dtype t, const float *src, int64_t n, void *dst) {
    if (n <= 0 || !fx_dtype_can_quantize(t)) return;
    quantizers[t](src, n / fx_dtype_block(t), dst);
}

void fx_quantize(const fx_kctx *kc, fx_dtype t, int64_t rows, int64_t cols, const float *src, void *dst) {
    if (rows <= 0 || cols <= 0 || !fx_dtype_can_quantize(t)) return;
    const int64_t row_bytes = fx_dtype_row_bytes(t, cols);
    const fx_quant_kernels *q = kc && kc->k ? kc->k->quant : NULL;
    const fx_quant_fn fn = q && q->quant[t] ? q->quant[t] : quantizers[t];
    const int64_t nb = cols / fx_dtype_block(t);
    const int threads = kc && kc->threads > 1 && rows > 1 ? kc->threads : 1;
    (void)threads; /* unused without OpenMP */
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads) if (threads > 1)
    for (int64_t r = 0; r < rows; r++) fn(src + r * cols, nb, (uint8_t *)dst + r * row_bytes);
}
