/*
 * vec_neon.h — the vector vocabulary of rowops_simd.h / rope_simd.h for
 * aarch64 Advanced SIMD (4 f32 lanes). Included only by *_neon.c files.
 */
#ifndef FX_VEC_NEON_H
#define FX_VEC_NEON_H

#include <arm_neon.h>

#define FX_W 4
typedef float32x4_t fxv;

#define V_LOAD(p) vld1q_f32(p)
#define V_STORE(p, v) vst1q_f32(p, v)
#define V_SET1(x) vdupq_n_f32(x)
#define V_ADD(a, b) vaddq_f32(a, b)
#define V_SUB(a, b) vsubq_f32(a, b)
#define V_MUL(a, b) vmulq_f32(a, b)
#define V_DIV(a, b) vdivq_f32(a, b)
#define V_FMA(a, b, c) vfmaq_f32(c, a, b) /* a·b + c, one rounding */
/* fmin/fmax propagate NaN from either operand. */
#define V_MIN(a, b) vminq_f32(a, b)
#define V_MAX(a, b) vmaxq_f32(a, b)
#define V_ROUND(v) vrndnq_f32(v)

/* p·2^n for integral n in [−150, 128]: two exact power-of-two factors
 * 2^(n>>1) and 2^(n − (n>>1)), so subnormal results round once. */
static inline fxv v_ldexp(fxv p, fxv n) {
    int32x4_t i = vcvtq_s32_f32(n);
    int32x4_t h = vshrq_n_s32(i, 1), l = vsubq_s32(i, h);
    int32x4_t b = vdupq_n_s32(127);
    fxv s1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(h, b), 23));
    fxv s2 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(l, b), 23));
    return vmulq_f32(vmulq_f32(p, s1), s2);
}

/* The 2^n step of v_exp2 (vec_exp2.h), x clamped at FX_EXP2_MIN: y·2^n
 * for integral n in [−127, 0], 2^n built in the exponent field (n = −127
 * gives a zero field: the result is +0, not a subnormal). */
#define FX_EXP2_MIN -127.0f
static inline fxv v_exp2_scale(fxv y, fxv n) {
    const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
    return vmulq_f32(y, vreinterpretq_f32_s32(e));
}

/* −inf lanes → +0; every other lane (NaN too) kept. */
static inline fxv v_ninf_to_zero(fxv v) {
    return vbslq_f32(vceqq_f32(v, vdupq_n_f32(-__builtin_inff())), vdupq_n_f32(0.0f), v);
}

/* Horizontal reductions, a fixed tree: 4 → 2 → 1 (halves added). */
static inline float v_hsum(fxv v) {
    float32x2_t a = vadd_f32(vget_low_f32(v), vget_high_f32(v));
    return vget_lane_f32(a, 0) + vget_lane_f32(a, 1);
}
static inline float v_hmax(fxv v) {
    float32x2_t a = vmax_f32(vget_low_f32(v), vget_high_f32(v));
    float x = vget_lane_f32(a, 0), y = vget_lane_f32(a, 1);
    return x > y ? x : y;
}

/* RoPE helpers: swap the lanes of each pair; flip the sign of even lanes;
 * duplicate FX_W/2 consecutive floats into pairs [c0 c0 c1 c1]. */
#define V_SWAP_PAIRS(v) vrev64q_f32(v)
static inline fxv v_neg_even(fxv v) {
    const uint32x4_t m = {0x80000000u, 0, 0x80000000u, 0};
    return vreinterpretq_f32_u32(veorq_u32(vreinterpretq_u32_f32(v), m));
}
static inline fxv v_dup_pairs(const float *c) {
    float32x2_t c2 = vld1_f32(c);
    return vcombine_f32(vdup_lane_f32(c2, 0), vdup_lane_f32(c2, 1));
}

#endif
