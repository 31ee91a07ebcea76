/*
 * vec_avx2.h — the vector vocabulary of rowops_simd.h / rope_simd.h for
 * AVX2 + FMA (8 f32 lanes). Included only by *_avx2.c files.
 */
#ifndef FX_VEC_AVX2_H
#define FX_VEC_AVX2_H

#include "simd/common/x86.h"

#define FX_W 8
typedef __m256 fxv;

#define V_LOAD(p) _mm256_loadu_ps(p)
#define V_STORE(p, v) _mm256_storeu_ps(p, v)
#define V_SET1(x) _mm256_set1_ps(x)
#define V_ADD(a, b) _mm256_add_ps(a, b)
#define V_SUB(a, b) _mm256_sub_ps(a, b)
#define V_MUL(a, b) _mm256_mul_ps(a, b)
#define V_DIV(a, b) _mm256_div_ps(a, b)
#define V_FMA(a, b, c) _mm256_fmadd_ps(a, b, c) /* a·b + c, one rounding */
/* min/max return the second operand when one is NaN: callers put the
 * constant first so a NaN input propagates. */
#define V_MIN(a, b) _mm256_min_ps(a, b)
#define V_MAX(a, b) _mm256_max_ps(a, b)
#define V_ROUND(v) _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

/* p·2^n for integral n in [−150, 128]: two exact power-of-two factors
 * 2^(n>>1) and 2^(n − (n>>1)), so subnormal results round once. */
static inline fxv v_ldexp(fxv p, fxv n) {
    __m256i i = _mm256_cvtps_epi32(n);
    __m256i h = _mm256_srai_epi32(i, 1), l = _mm256_sub_epi32(i, h);
    __m256i b = _mm256_set1_epi32(127);
    fxv s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(h, b), 23));
    fxv s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(l, b), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

/* The 2^n step of v_exp2 (vec_exp2.h), x clamped at FX_EXP2_MIN: y·2^n
 * for integral n in [−127, 0], 2^n built in the exponent field (n = −127
 * gives a zero field: the result is +0, not a subnormal). */
#define FX_EXP2_MIN -127.0f
static inline fxv v_exp2_scale(fxv y, fxv n) {
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}

/* −inf lanes → +0; every other lane (NaN too) kept. */
static inline fxv v_ninf_to_zero(fxv v) {
    return _mm256_andnot_ps(_mm256_cmp_ps(v, _mm256_set1_ps(-__builtin_inff()), _CMP_EQ_OQ), v);
}

/* Horizontal reductions, a fixed tree: 8 → 4 → 2 → 1 (halves added). */
static inline float v_hsum(fxv v) {
    __m128 b = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    b = _mm_add_ps(b, _mm_movehl_ps(b, b));
    b = _mm_add_ss(b, _mm_movehdup_ps(b));
    return _mm_cvtss_f32(b);
}
static inline float v_hmax(fxv v) {
    __m128 b = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    b = _mm_max_ps(b, _mm_movehl_ps(b, b));
    b = _mm_max_ss(b, _mm_movehdup_ps(b));
    return _mm_cvtss_f32(b);
}

/* RoPE helpers: swap the lanes of each pair; flip the sign of even lanes;
 * duplicate FX_W/2 consecutive floats into pairs [c0 c0 c1 c1 ...]. */
#define V_SWAP_PAIRS(v) _mm256_permute_ps(v, 0xB1)
static inline fxv v_neg_even(fxv v) {
    const __m256 m = _mm256_castsi256_ps(_mm256_set_epi32(0, (int)0x80000000, 0, (int)0x80000000, 0,
                                                          (int)0x80000000, 0, (int)0x80000000));
    return _mm256_xor_ps(v, m);
}
static inline fxv v_dup_pairs(const float *c) {
    const __m256i idx = _mm256_set_epi32(3, 3, 2, 2, 1, 1, 0, 0);
    return _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(c)), idx);
}

#endif
