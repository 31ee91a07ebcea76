/*
 * quant.h — the ggml block types (simd-internal): byte layouts, the
 * per-ISA dequantization table, helpers shared by the quant files.
 *
 * Block layouts (offset: field; f16 = IEEE half, little-endian, at any
 * alignment — blocks are 18, 34, 84, 110 ... bytes long, so fields are
 * read with byte loads / memcpy, never through a cast pointer):
 *
 *   Q8_0   34 B / 32:  0 d f16 · 2 qs[32] i8                 x = q·d
 *   Q4_0   18 B / 32:  0 d · 2 qs[16]                         x = (q − 8)·d
 *   Q4_1   20 B / 32:  0 d · 2 m · 4 qs[16]                   x = q·d + m
 *   Q5_0   22 B / 32:  0 d · 2 qh u32 · 6 qs[16]              x = (q − 16)·d
 *   Q5_1   24 B / 32:  0 d · 2 m · 4 qh · 8 qs[16]            x = q·d + m
 *   IQ4_NL 18 B / 32:  0 d · 2 qs[16]                         x = d·K[q]
 *     (nibble blocks: element j < 16 is the low nibble of qs[j], element
 *      j + 16 its high nibble; the 5th bit of element j is bit j of qh)
 *   Q2_K   84 B / 256: 0 scales[16] (lo: scale, hi: min) · 16 qs[64] ·
 *                      80 d · 82 dmin      x = (d·sc)·q − dmin·mn, q 2 bits
 *   Q3_K  110 B / 256: 0 hmask[32] · 32 qs[64] · 96 scales[12] (16 × 6 bit)
 *                      · 108 d             x = (d·(s − 32))·(q − 4·!hbit)
 *   Q4_K  144 B / 256: 0 d · 2 dmin · 4 scales[12] (8 × (6-bit scale,
 *                      6-bit min)) · 16 qs[128]       x = (d·sc)·q − dmin·mn
 *   Q5_K  176 B / 256: as Q4_K plus 16 qh[32], qs at 48; q 5 bits
 *   Q6_K  210 B / 256: 0 ql[128] · 128 qh[64] · 192 scales[16] i8 · 208 d
 *                      x = (d·sc)·(q − 32), q 6 bits
 *   IQ4_XS 136 B / 256: 0 d · 2 scales_h u16 · 4 scales_l[4] · 8 qs[128]
 *                      x = (d·(ls − 32))·K[q]
 * (the element order inside the K-quant super-blocks is spelled out by the
 * reference dequantizers in dequant.c).
 */
#ifndef FX_QUANT_H
#define FX_QUANT_H

#include <stdint.h>
#include <string.h>

#include "simd/common/arch.h"
#include "simd/common/table.h"

/* Dequantize nb whole blocks of one type from src into dst (nb·block
 * floats); bit-identical to the scalar reference of that type. */
typedef void (*fx_dequant_fn)(const uint8_t *src, int64_t nb, float *dst);

/* Quantize nb blocks (elements for F32/F16/BF16) of finite values; the
 * vector ones byte-identical to the scalar reference (quantize.c). */
typedef void (*fx_quant_fn)(const float *x, int64_t nb, uint8_t *dst);

/* The same into bf16 (round to nearest even, NaN quiet: the row table's
 * f32 → bf16 of the f32 result). */
typedef void (*fx_dequant_bf16_fn)(const uint8_t *src, int64_t nb, uint16_t *dst);
/* n stored elements → the int8 rule's codes, scale and code sum in one
 * pass over the source (fx_int8_codes of the widened values, bit for bit):
 * the int8 form of --precision int8 made at memory speed. */
typedef void (*fx_int8_row_fn)(const uint8_t *src, int64_t n, int8_t *q, float *scale, int32_t *sum);

typedef struct fx_quant_kernels {
    const char *name;
    fx_dequant_fn dequant[FX_DTYPE_COUNT];           /* NULL: the scalar reference */
    fx_dequant_bf16_fn dequant_bf16[FX_DTYPE_COUNT]; /* NULL: dequant, then f32 → bf16 */
    fx_quant_fn quant[FX_DTYPE_COUNT];               /* NULL: the scalar reference */
    fx_int8_row_fn to_int8[FX_DTYPE_COUNT];          /* NULL: dequant, then fx_int8_codes */
} fx_quant_kernels;

/* The scalar reference of each block type (dequant.c); NULL for F32/F16/BF16. */
extern const fx_dequant_fn fx_dequant_ref[FX_DTYPE_COUNT];

/* The table's dequantizer of a block type (the reference if it has none). */
fx_dequant_fn fx_quant_dequant_fn(const fx_kernels *k, fx_dtype t);
/* The table's direct bf16 dequantizer of a block type, or NULL. */
fx_dequant_bf16_fn fx_quant_dequant_bf16_fn(const fx_kernels *k, fx_dtype t);

/* fp8 bytes → f32, exact. E5M2 has the exponent field and bias (15) of an
 * IEEE half: it is the half's upper byte (infinities and NaNs included).
 * E4M3FN ("fn": finite): bias 7, subnormals m·2⁻⁹, no infinities, the
 * all-ones exponent with mantissa 7 (0x7F / 0xFF) is NaN, max ±448. */
static inline float fx_f8_e5m2_to_f32(uint8_t b) { return fx_f16_bits_to_f32((uint16_t)(b << 8)); }
static inline float fx_f8_e4m3_to_f32(uint8_t b) {
    const uint32_t e = (b >> 3) & 15, m = b & 7, sign = (uint32_t)(b & 0x80) << 24;
    uint32_t bits;
    if (e == 15 && m == 7) {
        bits = sign | 0x7FC00000u; /* quiet NaN */
    } else if (e == 0) {
        float v = (float)m * 0x1p-9f; /* subnormal: exact */
        memcpy(&bits, &v, 4);
        bits |= sign;
    } else {
        bits = sign | (e + 120) << 23 | m << 20; /* 2^(e-7)·1.m, f32 bias 127 */
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* The 16 values of the IQ4_NL / IQ4_XS non-linear grid. */
extern const int8_t fx_iq4nl_values[16];

/* Little-endian field loads from unaligned block bytes. */
static inline float fx_q_f16(const uint8_t *p) { return fx_f16_bits_to_f32((uint16_t)(p[0] | p[1] << 8)); }
static inline uint32_t fx_q_u32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static inline void fx_q_put_f16(uint8_t *p, float v) {
    uint16_t h = fx_f32_to_f16_bits(v);
    p[0] = (uint8_t)h, p[1] = (uint8_t)(h >> 8);
}

/* Q4_K / Q5_K: the 6-bit scale and min of sub-block j (0..7) from the 12
 * packed bytes s (bytes 0–3: scales 0–3 + top bits of scales 4–7; 4–7:
 * mins 0–3 + top bits of mins 4–7; 8–11: low nibbles of scales/mins 4–7). */
static inline void fx_q_scale_min_k4(int j, const uint8_t *s, uint8_t *sc, uint8_t *mn) {
    if (j < 4) {
        *sc = s[j] & 63, *mn = s[j + 4] & 63;
    } else {
        *sc = (uint8_t)((s[j + 4] & 15) | ((s[j - 4] >> 6) << 4));
        *mn = (uint8_t)((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
    }
}

/* Q3_K: the 16 signed 6-bit scales (already minus 32) from its 12 bytes. */
static inline void fx_q3k_scales(const uint8_t *s, int8_t out[16]) {
    for (int j = 0; j < 16; j++) {
        int lo = j < 8 ? s[j] & 15 : s[j - 8] >> 4;
        int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
        out[j] = (int8_t)((lo | hi << 4) - 32);
    }
}

/* The vector quantizers of an ISA (quant_lanes.h in quantize_<isa>.c). */
#define FX_QUANT_DECLARE(isa)                                                 \
    void fx_quant_q8_0_##isa(const float *x, int64_t nb, uint8_t *dst);      \
    void fx_quant_q4_0_##isa(const float *x, int64_t nb, uint8_t *dst);      \
    void fx_quant_q4_1_##isa(const float *x, int64_t nb, uint8_t *dst);      \
    void fx_quant_q5_0_##isa(const float *x, int64_t nb, uint8_t *dst);      \
    void fx_quant_q5_1_##isa(const float *x, int64_t nb, uint8_t *dst);      \
    void fx_quant_q2_k_##isa(const float *x, int64_t nb, uint8_t *dst);      \
    void fx_quant_q3_k_##isa(const float *x, int64_t nb, uint8_t *dst);      \
    void fx_quant_q4_k_##isa(const float *x, int64_t nb, uint8_t *dst);      \
    void fx_quant_q5_k_##isa(const float *x, int64_t nb, uint8_t *dst);      \
    void fx_quant_q6_k_##isa(const float *x, int64_t nb, uint8_t *dst);

/* Their table entries. */
#define FX_QUANT_ENTRIES(isa)                                                                     \
    [FX_DTYPE_Q8_0] = fx_quant_q8_0_##isa, [FX_DTYPE_Q4_0] = fx_quant_q4_0_##isa,                 \
    [FX_DTYPE_Q4_1] = fx_quant_q4_1_##isa, [FX_DTYPE_Q5_0] = fx_quant_q5_0_##isa,                 \
    [FX_DTYPE_Q5_1] = fx_quant_q5_1_##isa, [FX_DTYPE_Q2_K] = fx_quant_q2_k_##isa,                 \
    [FX_DTYPE_Q3_K] = fx_quant_q3_k_##isa, [FX_DTYPE_Q4_K] = fx_quant_q4_k_##isa,                 \
    [FX_DTYPE_Q5_K] = fx_quant_q5_k_##isa, [FX_DTYPE_Q6_K] = fx_quant_q6_k_##isa

/* ---- the tables ---- */

extern const fx_quant_kernels fx_quant_scalar;
#if FX_X86
extern const fx_quant_kernels fx_quant_avx2;
extern const fx_quant_kernels fx_quant_avx512;
/* bf16 rows → int8 codes (to_int8_avx2.c, to_int8_avx512.c) */
void fx_bf16_to_int8_avx2(const uint8_t *src, int64_t n, int8_t *q, float *scale, int32_t *sum);
void fx_bf16_to_int8_avx512(const uint8_t *src, int64_t n, int8_t *q, float *scale, int32_t *sum);
#endif
#if FX_ARM
extern const fx_quant_kernels fx_quant_neon;
#endif

/* The rule's int8 codes of n values: s = max|x|/127, code = x·(127/max|x|)
 * rounded to nearest even, Σ codes; all zero (s 0) when max|x| is 0, not
 * finite, or so small (< 127/FLT_MAX ≈ 3.7e-37: subnormal rows) that
 * 127/max|x| is not finite. Shared by the activations (per call) and the weights
 * (fx_weight_row_to_int8). Written in 32-element steps of integer
 * operations so that the compiler vectorizes it (the last n % 32 values
 * one by one, the same operations): max|x| as the largest |x| bit pattern
 * (ordered like the values for finite x), the rounding by adding 1.5·2^23
 * (the float's low bits are then the integer, exact for |v| <= 127). */
/* The rule's degenerate rows (below): zero codes, scale 0, sum 0; 1 if
 * the row with this max|x| is one. */
static inline int fx_int8_zero_row(float amax, int64_t n, int8_t *q, float *scale, int32_t *sum) {
    if (amax > 0.0f && amax <= 3.4028235e38f && 127.0f / amax <= 3.4028235e38f) return 0;
    memset(q, 0, (size_t)n);
    *scale = 0.0f, *sum = 0;
    return 1;
}

static inline void fx_int8_codes(const float *x, int64_t n, int8_t *q, float *scale, int32_t *sum) {
    const int64_t n32 = n / 32 * 32;
    uint32_t mx = 0;
    for (int64_t b = 0; b < n32; b += 32) {
        uint32_t u[32], m = 0;
        memcpy(u, x + b, sizeof u);
        for (int j = 0; j < 32; j++) m = (u[j] & 0x7fffffffu) > m ? (u[j] & 0x7fffffffu) : m;
        mx = m > mx ? m : mx;
    }
    for (int64_t i = n32; i < n; i++) {
        uint32_t u;
        memcpy(&u, x + i, 4);
        mx = (u & 0x7fffffffu) > mx ? (u & 0x7fffffffu) : mx;
    }
    float amax;
    memcpy(&amax, &mx, 4);
    if (fx_int8_zero_row(amax, n, q, scale, sum)) return;
    const float inv = 127.0f / amax;
    int32_t s = 0;
    for (int64_t b = 0; b < n32; b += 32) {
        float t[32];
        int32_t r[32];
        for (int j = 0; j < 32; j++) t[j] = x[b + j] * inv + 12582912.0f;
        memcpy(r, t, sizeof r);
        for (int j = 0; j < 32; j++) {
            r[j] -= 0x4b400000;
            q[b + j] = (int8_t)r[j];
            s += r[j];
        }
    }
    for (int64_t i = n32; i < n; i++) {
        const float t = x[i] * inv + 12582912.0f;
        int32_t r;
        memcpy(&r, &t, 4);
        r -= 0x4b400000;
        q[i] = (int8_t)r;
        s += r;
    }
    *scale = amax / 127.0f, *sum = s;
}

#endif
