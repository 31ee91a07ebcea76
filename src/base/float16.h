/*
 * float16.h — exact single-element conversions between f32 and the two
 * 16-bit float formats, bf16 and IEEE half (f16).
 *
 * Header-only, so every user (the kernels' scalar paths and vector tails,
 * the safetensors loader and its fuzz targets) shares one definition
 * without linking kernel code.
 *
 * Widening is lossless. Narrowing rounds to nearest, ties to even, handles
 * subnormals and overflows to ±inf. NaNs stay NaN: quiet bit set, top
 * payload bits kept — what F16C's vcvtph2ps / vcvtps2ph and the NEON fcvt
 * instructions do, so every ISA agrees bit for bit.
 */
#ifndef FX_FLOAT16_H
#define FX_FLOAT16_H

#include <stdint.h>

static inline uint32_t fx_f32_bits(float f) {
    union { float f; uint32_t u; } v = {.f = f};
    return v.u;
}
static inline float fx_bits_f32(uint32_t u) {
    union { uint32_t u; float f; } v = {.u = u};
    return v.f;
}

/* Zeros and subnormals → signed zero: how the bf16 dot-product units
 * (vdpbf16ps, AMX tdpbf16ps, vcvtne2ps2bf16) read their inputs and write
 * their results (DAZ / FTZ). The conversions below keep subnormals. */
static inline float fx_f32_flush_subnormal(float f) {
    uint32_t u = fx_f32_bits(f);
    return (u & 0x7f800000u) ? f : fx_bits_f32(u & 0x80000000u);
}

static inline float fx_bf16_bits_to_f32(uint16_t h) { return fx_bits_f32((uint32_t)h << 16); }

static inline uint16_t fx_f32_to_bf16_bits(float f) {
    uint32_t u = fx_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* NaN stays NaN */
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static inline float fx_f16_bits_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0x1f) /* inf, or NaN made quiet */
        return fx_bits_f32(sign | 0x7f800000u | (mant ? 0x400000u | (mant << 13) : 0));
    if (exp == 0) {
        if (!mant) return fx_bits_f32(sign);
        /* subnormal mant·2^-24: normalise so the leading 1 is bit 10 */
        int e = -14;
        while (!(mant & 0x400u)) {
            mant <<= 1;
            e--;
        }
        return fx_bits_f32(sign | (uint32_t)(e + 127) << 23 | (mant & 0x3ffu) << 13);
    }
    return fx_bits_f32(sign | (exp + 112) << 23 | mant << 13);
}

static inline uint16_t fx_f32_to_f16_bits(float f) {
    uint32_t u = fx_f32_bits(f);
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

#endif
