/*
 * dequant.c — the scalar reference dequantizers of every block type, and
 * fx_dequantize_row / fx_dequantize.
 *
 * Values follow ggml's reference dequantizers operation by operation (the
 * products are formed in the order written, e.g. Q4_K (d·sc)·q − dmin·mn,
 * each rounded to f32; this file is built with -ffp-contract=off), so the
 * vector kernels, which do the same operations lane by lane, agree bit for
 * bit.
 */
#include "quant.h"

#include "simd/rowops/rowops.h"

const int8_t fx_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                    1,    13,   25,  38,  53,  69,  89,  113};

/* ------------------------------------------------------------------------ */
/* 32-element blocks                                                        */
/* ------------------------------------------------------------------------ */

static void dq_q8_0(const uint8_t *b, int64_t nb, float *y) {
    for (int64_t i = 0; i < nb; i++, b += 34, y += 32) {
        const float d = fx_q_f16(b);
        for (int j = 0; j < 32; j++) y[j] = (float)(int8_t)b[2 + j] * d;
    }
}

static void dq_q4_0(const uint8_t *b, int64_t nb, float *y) {
    for (int64_t i = 0; i < nb; i++, b += 18, y += 32) {
        const float d = fx_q_f16(b);
        for (int j = 0; j < 16; j++) {
            y[j] = (float)((b[2 + j] & 15) - 8) * d;
            y[j + 16] = (float)((b[2 + j] >> 4) - 8) * d;
        }
    }
}

static void dq_q4_1(const uint8_t *b, int64_t nb, float *y) {
    for (int64_t i = 0; i < nb; i++, b += 20, y += 32) {
        const float d = fx_q_f16(b), m = fx_q_f16(b + 2);
        for (int j = 0; j < 16; j++) {
            float lo = (float)(b[4 + j] & 15) * d, hi = (float)(b[4 + j] >> 4) * d;
            y[j] = lo + m;
            y[j + 16] = hi + m;
        }
    }
}

/* 5-bit q of element j of a Q5 block: nibble + bit j of qh as bit 4. */
static inline int q5(const uint8_t *qs, uint32_t qh, int j) {
    int nib = j < 16 ? qs[j] & 15 : qs[j - 16] >> 4;
    return nib | (int)((qh >> j) & 1) << 4;
}

static void dq_q5_0(const uint8_t *b, int64_t nb, float *y) {
    for (int64_t i = 0; i < nb; i++, b += 22, y += 32) {
        const float d = fx_q_f16(b);
        const uint32_t qh = fx_q_u32(b + 2);
        for (int j = 0; j < 32; j++) y[j] = (float)(q5(b + 6, qh, j) - 16) * d;
    }
}

static void dq_q5_1(const uint8_t *b, int64_t nb, float *y) {
    for (int64_t i = 0; i < nb; i++, b += 24, y += 32) {
        const float d = fx_q_f16(b), m = fx_q_f16(b + 2);
        const uint32_t qh = fx_q_u32(b + 4);
        for (int j = 0; j < 32; j++) {
            float t = (float)q5(b + 8, qh, j) * d;
            y[j] = t + m;
        }
    }
}

static void dq_iq4_nl(const uint8_t *b, int64_t nb, float *y) {
    for (int64_t i = 0; i < nb; i++, b += 18, y += 32) {
        const float d = fx_q_f16(b);
        for (int j = 0; j < 16; j++) {
            y[j] = d * (float)fx_iq4nl_values[b[2 + j] & 15];
            y[j + 16] = d * (float)fx_iq4nl_values[b[2 + j] >> 4];
        }
    }
}

/* ------------------------------------------------------------------------ */
/* 256-element super-blocks                                                 */
/* ------------------------------------------------------------------------ */

/* Q2_K / Q3_K / Q6_K element order: the super-block is two halves of 128;
 * in half h, element 32t + l (t = 0..3, l = 0..31) takes 2-bit field t of
 * byte qs[32h + l] (Q6_K: nibble t&1... see dq_q6_k). Sub-blocks of 16. */

static void dq_q2_k(const uint8_t *b, int64_t nb, float *y) {
    for (int64_t i = 0; i < nb; i++, b += 84) {
        const uint8_t *sc = b, *qs = b + 16;
        const float d = fx_q_f16(b + 80), dmin = fx_q_f16(b + 82);
        for (int e0 = 0; e0 < 256; e0 += 16, y += 16) {
            const int s = e0 / 16, h = e0 / 128, t = (e0 % 128) / 32, l0 = e0 % 32;
            const float dl = d * (float)(sc[s] & 15), ml = dmin * (float)(sc[s] >> 4);
            for (int l = 0; l < 16; l++) {
                float v = dl * (float)((qs[32 * h + l0 + l] >> (2 * t)) & 3);
                y[l] = v - ml;
            }
        }
    }
}

static void dq_q3_k(const uint8_t *b, int64_t nb, float *y) {
    for (int64_t i = 0; i < nb; i++, b += 110) {
        const uint8_t *hm = b, *qs = b + 32;
        const float d = fx_q_f16(b + 108);
        int8_t sc[16];
        fx_q3k_scales(b + 96, sc);
        for (int e0 = 0; e0 < 256; e0 += 16, y += 16) {
            const int s = e0 / 16, h = e0 / 128, t = (e0 % 128) / 32, l0 = e0 % 32;
            const float dl = d * (float)sc[s];
            const int bit = e0 / 32; /* hmask bit of elements e0.. */
            for (int l = 0; l < 16; l++) {
                int q = ((qs[32 * h + l0 + l] >> (2 * t)) & 3) - ((hm[l0 + l] >> bit) & 1 ? 0 : 4);
                y[l] = dl * (float)q;
            }
        }
    }
}

/* Q4_K / Q5_K: sub-block j (32 elements) takes the low nibbles (j even) or
 * high nibbles (j odd) of qs[32·(j/2) ..]; Q5_K's 5th bit is bit j of qh[l]. */
static void dq_q45_k(const uint8_t *b, int64_t nb, float *y, int five) {
    const size_t bytes = five ? 176 : 144;
    for (int64_t i = 0; i < nb; i++, b += bytes) {
        const float d = fx_q_f16(b), dmin = fx_q_f16(b + 2);
        const uint8_t *scales = b + 4, *qh = b + 16, *qs = b + (five ? 48 : 16);
        for (int j = 0; j < 8; j++, y += 32) {
            uint8_t sc, mn;
            fx_q_scale_min_k4(j, scales, &sc, &mn);
            const float dl = d * (float)sc, ml = dmin * (float)mn;
            const uint8_t *q = qs + 32 * (j / 2);
            for (int l = 0; l < 32; l++) {
                int v = j & 1 ? q[l] >> 4 : q[l] & 15;
                if (five) v += (qh[l] >> j) & 1 ? 16 : 0;
                float t = dl * (float)v;
                y[l] = t - ml;
            }
        }
    }
}

static void dq_q4_k(const uint8_t *b, int64_t nb, float *y) { dq_q45_k(b, nb, y, 0); }
static void dq_q5_k(const uint8_t *b, int64_t nb, float *y) { dq_q45_k(b, nb, y, 1); }

/* Q6_K: in half h, element 32t + l has low bits from ql[64h + 32(t&1) + l]
 * (low nibble for t < 2, high for t >= 2) and high bits (qh[32h + l] >> 2t) & 3. */
static void dq_q6_k(const uint8_t *b, int64_t nb, float *y) {
    for (int64_t i = 0; i < nb; i++, b += 210) {
        const uint8_t *ql = b, *qh = b + 128;
        const int8_t *sc = (const int8_t *)(b + 192);
        const float d = fx_q_f16(b + 208);
        for (int e0 = 0; e0 < 256; e0 += 16, y += 16) {
            const int s = e0 / 16, h = e0 / 128, t = (e0 % 128) / 32, l0 = e0 % 32;
            const float dl = d * (float)sc[s];
            for (int l = 0; l < 16; l++) {
                const uint8_t lb = ql[64 * h + 32 * (t & 1) + l0 + l];
                int q = (t < 2 ? lb & 15 : lb >> 4) | ((qh[32 * h + l0 + l] >> (2 * t)) & 3) << 4;
                y[l] = dl * (float)(q - 32);
            }
        }
    }
}

static void dq_iq4_xs(const uint8_t *b, int64_t nb, float *y) {
    for (int64_t i = 0; i < nb; i++, b += 136) {
        const float d = fx_q_f16(b);
        const unsigned sh = (unsigned)(b[2] | b[3] << 8);
        const uint8_t *sl = b + 4, *qs = b + 8;
        for (int j = 0; j < 8; j++, y += 32, qs += 16) {
            int ls = ((sl[j / 2] >> (4 * (j & 1))) & 15) | (int)((sh >> (2 * j)) & 3) << 4;
            const float dl = d * (float)(ls - 32);
            for (int l = 0; l < 16; l++) {
                y[l] = dl * (float)fx_iq4nl_values[qs[l] & 15];
                y[l + 16] = dl * (float)fx_iq4nl_values[qs[l] >> 4];
            }
        }
    }
}

/* fp8 (one byte per element, no block scale: the per-tensor scale is the
 * weight's, applied by whoever expands it). Every fp8 value is an f32. */
static void dq_f8_e4m3(const uint8_t *x, int64_t n, float *y) {
    for (int64_t i = 0; i < n; i++) y[i] = fx_f8_e4m3_to_f32(x[i]);
}

static void dq_f8_e5m2(const uint8_t *x, int64_t n, float *y) {
    for (int64_t i = 0; i < n; i++) y[i] = fx_f8_e5m2_to_f32(x[i]);
}

/* E2M1 (OCP MX 1.0 FP4: sign, 2 exponent bits with bias 1, 1 mantissa
 * bit; no infinities or NaN) pairs, the even element in the high nibble
 * (comfy-kitchen float_utils.py pack_uint4 / dequantize_nvfp4, hi_first
 * = True, their default and ComfyUI's); the scales are the weight's. */
static void dq_f4_e2m1(const uint8_t *x, int64_t nb, float *y) {
    static const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    for (int64_t i = 0; i < nb; i++) {
        const unsigned hi = x[i] >> 4, lo = x[i] & 15;
        y[2 * i] = hi & 8 ? -mag[hi & 7] : mag[hi & 7];
        y[2 * i + 1] = lo & 8 ? -mag[lo & 7] : mag[lo & 7];
    }
}

/* int8 codes (their scales are the weight's, as fp8's). */
static void dq_i8(const uint8_t *x, int64_t n, float *y) {
    for (int64_t i = 0; i < n; i++) y[i] = (float)(int8_t)x[i];
}

const fx_dequant_fn fx_dequant_ref[FX_DTYPE_COUNT] = {
    [FX_DTYPE_Q8_0] = dq_q8_0, [FX_DTYPE_Q4_0] = dq_q4_0, [FX_DTYPE_Q4_1] = dq_q4_1,
    [FX_DTYPE_Q5_0] = dq_q5_0, [FX_DTYPE_Q5_1] = dq_q5_1, [FX_DTYPE_Q2_K] = dq_q2_k,
    [FX_DTYPE_Q3_K] = dq_q3_k, [FX_DTYPE_Q4_K] = dq_q4_k, [FX_DTYPE_Q5_K] = dq_q5_k,
    [FX_DTYPE_Q6_K] = dq_q6_k, [FX_DTYPE_IQ4_NL] = dq_iq4_nl, [FX_DTYPE_IQ4_XS] = dq_iq4_xs,
    [FX_DTYPE_F8_E4M3] = dq_f8_e4m3, [FX_DTYPE_F8_E5M2] = dq_f8_e5m2, [FX_DTYPE_I8] = dq_i8,
    [FX_DTYPE_F4_E2M1] = dq_f4_e2m1,
};

const fx_quant_kernels fx_quant_scalar = {.name = "scalar"};

fx_dequant_fn fx_quant_dequant_fn(const fx_kernels *k, fx_dtype t) {
    if (!fx_dtype_is_weight(t)) return NULL;
    const fx_quant_kernels *q = k ? k->quant : NULL;
    return q && q->dequant[t] ? q->dequant[t] : fx_dequant_ref[t];
}

fx_dequant_bf16_fn fx_quant_dequant_bf16_fn(const fx_kernels *k, fx_dtype t) {
    const fx_quant_kernels *q = k ? k->quant : NULL;
    return q && (unsigned)t < FX_DTYPE_COUNT ? q->dequant_bf16[t] : NULL;
}

/* ------------------------------------------------------------------------ */
/* Entry points                                                             */
/* ------------------------------------------------------------------------ */

/* n elements of F32/F16/BF16 from possibly unaligned bytes. */
static void widen_row(fx_dtype t, const uint8_t *p, int64_t n, float *dst) {
    for (int64_t i = 0; i < n; i++) {
        if (t == FX_DTYPE_F32) memcpy(dst + i, p + 4 * i, 4);
        else {
            uint16_t h = (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
            dst[i] = t == FX_DTYPE_BF16 ? fx_bf16_bits_to_f32(h) : fx_f16_bits_to_f32(h);
        }
    }
}

/* widen_row through the table's vector conversion where the halves are
 * aligned (bf16 → f32 is exact; f16 → f32 too). */
static void widen(const fx_kctx *kc, fx_dtype t, const uint8_t *p, int64_t n, float *dst) {
    const struct fx_row_kernels *rk = fx_row_table(kc);
    if (t == FX_DTYPE_BF16 && !((uintptr_t)p & 1)) rk->bf16_to_f32(n, (const uint16_t *)(const void *)p, dst);
    else if (t == FX_DTYPE_F16 && !((uintptr_t)p & 1)) rk->f16_to_f32(n, (const uint16_t *)(const void *)p, dst);
    else widen_row(t, p, n, dst);
}

void fx_dequantize_row(fx_dtype t, const void *src, int64_t n, float *dst) {
    if (n <= 0 || !fx_dtype_is_weight(t)) return; /* callers check the dtype first */
    if (!fx_dequant_ref[t]) { /* F32, F16, BF16 */
        widen_row(t, src, n, dst);
        return;
    }
    fx_dequant_ref[t](src, n / fx_dtype_block(t), dst);
}

void fx_dequantize_row_kc(const fx_kctx *kc, fx_dtype t, const void *src, int64_t n, float *dst) {
    if (n <= 0 || !fx_dtype_is_weight(t)) return;
    const fx_dequant_fn fn = fx_quant_dequant_fn(kc ? kc->k : NULL, t);
    if (fn) fn(src, n / fx_dtype_block(t), dst);
    else if (kc && kc->k) widen(kc, t, src, n, dst);
    else widen_row(t, src, n, dst);
}

void fx_dequantize(const fx_kctx *kc, fx_dtype t, int64_t rows, int64_t cols, const void *src,
                   int64_t src_row_bytes, float *dst) {
    if (rows <= 0 || cols <= 0 || !fx_dtype_is_weight(t)) return;
    const fx_dequant_fn fn = fx_quant_dequant_fn(kc->k, t);
    const int64_t nb = cols / fx_dtype_block(t);
    const int threads = rows * cols >= 65536 && kc->threads > 1 ? kc->threads : 1;
    (void)threads; /* unused without OpenMP */
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int64_t r = 0; r < rows; r++) {
        const uint8_t *p = (const uint8_t *)src + r * src_row_bytes;
        if (fn) fn(p, nb, dst + r * cols);
        else widen(kc, t, p, cols, dst + r * cols);
    }
}
