/*
 * convert_neon.c — f32 ↔ bf16 / f16 for aarch64 Advanced SIMD, 4 elements
 * a step, bit-identical to the scalar reference (convert.c): bf16 rounding
 * in integer arithmetic, f16 through fcvtn/fcvtl (base ARMv8; round to
 * nearest even with the default FPCR, subnormals kept, NaN quiet with the
 * top payload bits). Tails use the scalar single-element functions.
 */
#include "simd/rowops/rowops.h"

#include <arm_neon.h>

void fx_bf16_to_f32_neon(int64_t n, const uint16_t *src, float *dst) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_u32((uint32_t *)(dst + i), vshll_n_u16(vld1_u16(src + i), 16));
    for (; i < n; i++) dst[i] = fx_bf16_bits_to_f32(src[i]);
}

void fx_f32_to_bf16_neon(int64_t n, const float *src, uint16_t *dst) {
    const uint32x4_t bias = vdupq_n_u32(0x7fff), one = vdupq_n_u32(1), quiet = vdupq_n_u32(0x40);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        float32x4_t v = vld1q_f32(src + i);
        uint32x4_t u = vreinterpretq_u32_f32(v), hi = vshrq_n_u32(u, 16);
        uint32x4_t r = vshrq_n_u32(vaddq_u32(vaddq_u32(u, bias), vandq_u32(hi, one)), 16);
        r = vbslq_u32(vceqq_f32(v, v), r, vorrq_u32(hi, quiet)); /* NaN != NaN */
        vst1_u16(dst + i, vmovn_u32(r));
    }
    for (; i < n; i++) dst[i] = fx_f32_to_bf16_bits(src[i]);
}

void fx_f16_to_f32_neon(int64_t n, const uint16_t *src, float *dst) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(dst + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(src + i))));
    for (; i < n; i++) dst[i] = fx_f16_bits_to_f32(src[i]);
}

void fx_f32_to_f16_neon(int64_t n, const float *src, uint16_t *dst) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1_u16(dst + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(src + i))));
    for (; i < n; i++) dst[i] = fx_f32_to_f16_bits(src[i]);
}
