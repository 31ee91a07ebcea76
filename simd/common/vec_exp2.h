/*
 * vec_exp2.h — 2^x for x <= 0 over the vector vocabulary (include after
 * vec_avx2.h, vec_avx512.h or vec_neon.h): the exp2 of the attention
 * softmax, whose arguments are s − max (<= 0, −inf for masked keys).
 *
 * x = n + f with n = round(x) and |f| <= 1/2; 2^f by a degree-6 minimax
 * polynomial (relative error 1.6e-8) in Horner form, one FMA per
 * coefficient; then y·2^n by the ISA's v_exp2_scale after clamping x at
 * its FX_EXP2_MIN (−inf → the clamp → +0). The ISAs differ only there:
 *   AVX2, NEON   clamp −127, 2^n in the exponent field: 2^x < 2^−126.5
 *                gives +0
 *   AVX-512      clamp −200, scalef: subnormal results down to 2^−149
 * (The difference is below 2^−126 of the row's largest probability.)
 * NaN follows V_MAX: x86 max returns the clamp (result +0), NEON's the NaN.
 */
#ifndef FX_VEC_EXP2_H
#define FX_VEC_EXP2_H

static inline fxv v_exp2(fxv x) {
    x = V_MAX(x, V_SET1(FX_EXP2_MIN));
    const fxv n = V_ROUND(x);
    const fxv f = V_SUB(x, n);
    fxv y = V_SET1(1.534581243e-04f);
    y = V_FMA(y, f, V_SET1(1.339993207e-03f));
    y = V_FMA(y, f, V_SET1(9.618489072e-03f));
    y = V_FMA(y, f, V_SET1(5.550328642e-02f));
    y = V_FMA(y, f, V_SET1(2.402264625e-01f));
    y = V_FMA(y, f, V_SET1(6.931471825e-01f));
    y = V_FMA(y, f, V_SET1(1.0f));
    return v_exp2_scale(y, n);
}

#endif
