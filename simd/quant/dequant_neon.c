/*
 * dequant_neon.c — NEON block dequantizers, bit-identical to dequant.c:
 * codes widened to int32 and converted exactly, then the reference's
 * multiplies and subtractions / additions lane by lane — separate
 * instructions, never a fused multiply-add (built with -ffp-contract=off).
 */
#include "quant.h"

#include <arm_neon.h>

/* ------------------------------------------------------------------------ */
/* Helpers: 16 int8 codes → 16 floats                                       */
/* ------------------------------------------------------------------------ */

static inline void widen16(int8x16_t q, float32x4_t f[4]) {
    int16x8_t lo = vmovl_s8(vget_low_s8(q)), hi = vmovl_s8(vget_high_s8(q));
    f[0] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo)));
    f[1] = vcvtq_f32_s32(vmovl_s16(vget_high_s16(lo)));
    f[2] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi)));
    f[3] = vcvtq_f32_s32(vmovl_s16(vget_high_s16(hi)));
}

/* y = (float)q · d */
static inline void put16_mul(int8x16_t q, float32x4_t d, float *y) {
    float32x4_t f[4];
    widen16(q, f);
    for (int k = 0; k < 4; k++) vst1q_f32(y + 4 * k, vmulq_f32(f[k], d));
}

/* y = d · (float)q − m */
static inline void put16_mul_sub(int8x16_t q, float32x4_t d, float32x4_t m, float *y) {
    float32x4_t f[4];
    widen16(q, f);
    for (int k = 0; k < 4; k++) vst1q_f32(y + 4 * k, vsubq_f32(vmulq_f32(d, f[k]), m));
}

/* y = (float)q · d + m */
static inline void put16_mul_add(int8x16_t q, float32x4_t d, float32x4_t m, float *y) {
    float32x4_t f[4];
    widen16(q, f);
    for (int k = 0; k < 4; k++) vst1q_f32(y + 4 * k, vaddq_f32(vmulq_f32(f[k], d), m));
}

/* y = d · (float)q */
static inline void put16_dmul(int8x16_t q, float32x4_t d, float *y) {
    float32x4_t f[4];
    widen16(q, f);
    for (int k = 0; k < 4; k++) vst1q_f32(y + 4 * k, vmulq_f32(d, f[k]));
}

static inline uint8x16_t lo_nib(uint8x16_t v) { return vandq_u8(v, vdupq_n_u8(15)); }
static inline uint8x16_t hi_nib(uint8x16_t v) { return vshrq_n_u8(v, 4); }
static inline int8x16_t s8(uint8x16_t v) { return vreinterpretq_s8_u8(v); }

/* Bits 16k .. 16k + 15 of qh as bytes of 16 (set) or 0. */
static inline uint8x16_t q5_bits(uint32_t qh, int k) {
    static const uint8_t sel_bytes[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    uint8x16_t b = vcombine_u8(vdup_n_u8((uint8_t)(qh >> (16 * k))), vdup_n_u8((uint8_t)(qh >> (16 * k + 8))));
    return vandq_u8(vtstq_u8(b, vld1q_u8(sel_bytes)), vdupq_n_u8(16));
}

/* 2-bit field t of each byte */
static inline uint8x16_t field2(uint8x16_t v, int t) {
    return vandq_u8(vshlq_u8(v, vdupq_n_s8((int8_t)(-2 * t))), vdupq_n_u8(3));
}

static inline int8x16_t iq4_grid(uint8x16_t nib) { return vqtbl1q_s8(vld1q_s8(fx_iq4nl_values), nib); }

/* ------------------------------------------------------------------------ */
/* 32-element blocks                                                        */
/* ------------------------------------------------------------------------ */

static void dq_q8_0(const uint8_t *b, int64_t nb, float *y) {
    for (int64_t i = 0; i < nb; i++, b += 34, y += 32) {
        const float32x4_t d = vdupq_n_f32(fx_q_f16(b));
        put16_mul(vld1q_s8((const int8_t *)(b + 2)), d, y);
        put16_mul(vld1q_s8((const int8_t *)(b + 18)), d, y + 16);
    }
}

static void dq_q4_0(const uint8_t *b, int64_t nb, float *y) {
    for (int64_t i = 0; i < nb; i++, b += 18, y += 32) {
        const float32x4_t d = vdupq_n_f32(fx_q_f16(b));
        uint8x16_t q = vld1q_u8(b + 2);
        put16_mul(vsubq_s8(s8(lo_nib(q)), vdupq_n_s8(8)), d, y);
        put16_mul(vsubq_s8(s8(hi_nib(q)), vdupq_n_s8(8)), d, y + 16);
    }
}

static void dq_q4_1(const uint8_t *b, int64_t nb, float *y) {
    for (int64_t i = 0; i < nb; i++, b += 20, y += 32) {
        const float32x4_t d = vdupq_n_f32(fx_q_f16(b)), m = vdupq_n_f32(fx_q_f16(b + 2));
        uint8x16_t q = vld1q_u8(b + 4);
        put16_mul_add(s8(lo_nib(q)), d, m, y);
        put16_mul_add(s8(hi_nib(q)), d, m, y + 16);
    }
}

static void dq_q5_0(const uint8_t *b, int64_t nb, float *y) {
    for (int64_t i = 0; i < nb; i++, b += 22, y += 32) {
        const float32x4_t d = vdupq_n_f32(fx_q_f16(b));
        const uint32_t qh = fx_q_u32(b + 2);
        uint8x16_t q = vld1q_u8(b + 6);
        put16_mul(vsubq_s8(s8(vorrq_u8(lo_nib(q), q5_bits(qh, 0))), vdupq_n_s8(16)), d, y);
        put16_mul(vsubq_s8(s8(vorrq_u8(hi_nib(q), q5_bits(qh, 1))), vdupq_n_s8(16)), d, y + 16);
    }
}

static void dq_q5_1(const uint8_t *b, int64_t nb, float *y) {
    for (int64_t i = 0; i < nb; i++, b += 24, y += 32) {
        const float32x4_t d = vdupq_n_f32(fx_q_f16(b)), m = vdupq_n_f32(fx_q_f16(b + 2));
        const uint32_t qh = fx_q_u32(b + 4);
        uint8x16_t q = vld1q_u8(b + 8);
        put16_mul_add(s8(vorrq_u8(lo_nib(q), q5_bits(qh, 0))), d, m, y);
        put16_mul_add(s8(vorrq_u8(hi_nib(q), q5_bits(qh, 1))), d, m, y + 16);
    }
}

static void dq_iq4_nl(const uint8_t *b, int64_t nb, float *y) {
    for (int64_t i = 0; i < nb; i++, b += 18, y += 32) {
        const float32x4_t d = vdupq_n_f32(fx_q_f16(b));
        uint8x16_t q = vld1q_u8(b + 2);
        put16_dmul(iq4_grid(lo_nib(q)), d, y);
        put16_dmul(iq4_grid(hi_nib(q)), d, y + 16);
    }
}

/* ------------------------------------------------------------------------ */
/* 256-element super-blocks                                                 */
/* ------------------------------------------------------------------------ */

static void dq_q2_k(const uint8_t *b, int64_t nb, float *y) {
    for (int64_t i = 0; i < nb; i++, b += 84) {
        const uint8_t *sc = b, *qs = b + 16;
        const float d = fx_q_f16(b + 80), dmin = fx_q_f16(b + 82);
        for (int s = 0; s < 16; s++, y += 16) {
            const int h = s / 8, t = (s % 8) / 2, l0 = 16 * (s % 2);
            const float32x4_t dl = vdupq_n_f32(d * (float)(sc[s] & 15)), ml = vdupq_n_f32(dmin * (float)(sc[s] >> 4));
            put16_mul_sub(s8(field2(vld1q_u8(qs + 32 * h + l0), t)), dl, ml, y);
        }
    }
}

static void dq_q3_k(const uint8_t *b, int64_t nb, float *y) {
    for (int64_t i = 0; i < nb; i++, b += 110) {
        const uint8_t *hm = b, *qs = b + 32;
        const float d = fx_q_f16(b + 108);
        int8_t sc[16];
        fx_q3k_scales(b + 96, sc);
        for (int s = 0; s < 16; s++, y += 16) {
            const int h = s / 8, t = (s % 8) / 2, l0 = 16 * (s % 2), bit = s / 2;
            const float32x4_t dl = vdupq_n_f32(d * (float)sc[s]);
            uint8x16_t q = field2(vld1q_u8(qs + 32 * h + l0), t);
            uint8x16_t set = vtstq_u8(vld1q_u8(hm + l0), vdupq_n_u8((uint8_t)(1u << bit)));
            uint8x16_t minus4 = vbicq_u8(vdupq_n_u8(4), set);
            put16_dmul(vsubq_s8(s8(q), s8(minus4)), dl, y);
        }
    }
}

static void dq_q45_k(const uint8_t *b, int64_t nb, float *y, int five) {
    const size_t bytes = five ? 176 : 144;
    for (int64_t i = 0; i < nb; i++, b += bytes) {
        const float d = fx_q_f16(b), dmin = fx_q_f16(b + 2);
        const uint8_t *scales = b + 4, *qh = b + 16, *qs = b + (five ? 48 : 16);
        for (int j = 0; j < 8; j++, y += 32) {
            uint8_t sc, mn;
            fx_q_scale_min_k4(j, scales, &sc, &mn);
            const float32x4_t dl = vdupq_n_f32(d * (float)sc), ml = vdupq_n_f32(dmin * (float)mn);
            const uint8_t *q = qs + 32 * (j / 2);
            for (int half = 0; half < 2; half++) {
                uint8x16_t v = vld1q_u8(q + 16 * half);
                v = j & 1 ? hi_nib(v) : lo_nib(v);
                if (five) {
                    uint8x16_t set = vtstq_u8(vld1q_u8(qh + 16 * half), vdupq_n_u8((uint8_t)(1u << j)));
                    v = vorrq_u8(v, vandq_u8(set, vdupq_n_u8(16)));
                }
                put16_mul_sub(s8(v), dl, ml, y + 16 * half);
            }
        }
    }
}

static void dq_q4_k(const uint8_t *b, int64_t nb, float *y) { dq_q45_k(b, nb, y, 0); }
static void dq_q5_k(const uint8_t *b, int64_t nb, float *y) { dq_q45_k(b, nb, y, 1); }

static void dq_q6_k(const uint8_t *b, int64_t nb, float *y) {
    for (int64_t i = 0; i < nb; i++, b += 210) {
        const uint8_t *ql = b, *qh = b + 128;
        const int8_t *sc = (const int8_t *)(b + 192);
        const float d = fx_q_f16(b + 208);
        for (int s = 0; s < 16; s++, y += 16) {
            const int h = s / 8, t = (s % 8) / 2, l0 = 16 * (s % 2);
            const float32x4_t dl = vdupq_n_f32(d * (float)sc[s]);
            uint8x16_t lb = vld1q_u8(ql + 64 * h + 32 * (t & 1) + l0);
            uint8x16_t lo = t < 2 ? lo_nib(lb) : hi_nib(lb);
            uint8x16_t hi = field2(vld1q_u8(qh + 32 * h + l0), t);
            int8x16_t q = vsubq_s8(s8(vorrq_u8(lo, vshlq_n_u8(hi, 4))), vdupq_n_s8(32));
            put16_dmul(q, dl, y);
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
            const float32x4_t dl = vdupq_n_f32(d * (float)(ls - 32));
            uint8x16_t q = vld1q_u8(qs);
            put16_dmul(iq4_grid(lo_nib(q)), dl, y);
            put16_dmul(iq4_grid(hi_nib(q)), dl, y + 16);
        }
    }
}

/* ---- fp8, 8 bytes at a time (the method of dequant_avx512.c: a half's
 * fields, widened by fcvtl; NaNs as the scalar decoder makes them) ---- */
static void put_f16x8(uint16x8_t h, float *y) {
    const float16x8_t v = vreinterpretq_f16_u16(h);
    vst1q_f32(y, vcvt_f32_f16(vget_low_f16(v)));
    vst1q_f32(y + 4, vcvt_high_f32_f16(v));
}

static void dq_f8_e5m2(const uint8_t *x, int64_t n, float *y) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) put_f16x8(vshlq_n_u16(vmovl_u8(vld1_u8(x + i)), 8), y + i);
    for (; i < n; i++) y[i] = fx_f8_e5m2_to_f32(x[i]);
}

static void dq_f8_e4m3(const uint8_t *x, int64_t n, float *y) {
    int64_t i = 0;
    const uint16x8_t low7 = vdupq_n_u16(0x7F), sign = vdupq_n_u16(0x80);
    const uint32x4_t qnan = vdupq_n_u32(0x7FC00000), sbit = vdupq_n_u32(0x80000000u);
    for (; i + 8 <= n; i += 8) {
        const uint16x8_t w = vmovl_u8(vld1_u8(x + i));
        const uint16x8_t h = vorrq_u16(vshlq_n_u16(vandq_u16(w, sign), 8), vshlq_n_u16(vandq_u16(w, low7), 7));
        const int16x8_t nan = vreinterpretq_s16_u16(vceqq_u16(vandq_u16(w, low7), low7));
        put_f16x8(h, y + i);
        for (int j = 0; j < 2; j++) {
            float32x4_t f = vmulq_n_f32(vld1q_f32(y + i + 4 * j), 256.0f);
            const uint32x4_t m = vreinterpretq_u32_s32(vmovl_s16(j ? vget_high_s16(nan) : vget_low_s16(nan)));
            const uint32x4_t q = vorrq_u32(vandq_u32(vreinterpretq_u32_f32(f), sbit), qnan);
            vst1q_f32(y + i + 4 * j, vbslq_f32(m, vreinterpretq_f32_u32(q), f));
        }
    }
    for (; i < n; i++) y[i] = fx_f8_e4m3_to_f32(x[i]);
}

FX_QUANT_DECLARE(neon)

const fx_quant_kernels fx_quant_neon = {
    .name = "neon",
    .quant = {FX_QUANT_ENTRIES(neon)},
    .dequant = {
        [FX_DTYPE_Q8_0] = dq_q8_0, [FX_DTYPE_Q4_0] = dq_q4_0, [FX_DTYPE_Q4_1] = dq_q4_1,
        [FX_DTYPE_Q5_0] = dq_q5_0, [FX_DTYPE_Q5_1] = dq_q5_1, [FX_DTYPE_Q2_K] = dq_q2_k,
        [FX_DTYPE_Q3_K] = dq_q3_k, [FX_DTYPE_Q4_K] = dq_q4_k, [FX_DTYPE_Q5_K] = dq_q5_k,
        [FX_DTYPE_Q6_K] = dq_q6_k, [FX_DTYPE_IQ4_NL] = dq_iq4_nl, [FX_DTYPE_IQ4_XS] = dq_iq4_xs,
        [FX_DTYPE_F8_E4M3] = dq_f8_e4m3, [FX_DTYPE_F8_E5M2] = dq_f8_e5m2,
    },
};
