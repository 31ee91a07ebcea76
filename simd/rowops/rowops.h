/*
 * rowops.h — per-ISA tables of the rowops kernel family (simd-internal).
 *
 * The family defines one const table per ISA it implements, declared
 * below and wired into the kernel tables by dispatch.c.
 *
 * The family covers everything in kernels.h that is not GEMM or attention:
 * row ops (norms, activations, softmax), GroupNorm, conversions and RoPE.
 * Every entry works on ONE row (or one contiguous span); threading over
 * rows lives in the public wrappers (rowops.c, groupnorm.c, convert.c,
 * rope.c), so a result never depends on the thread count.
 *
 * Accuracy contract of the vector entries against the scalar reference:
 *  - exp: the vectorised expf of every SIMD ISA is the same algorithm
 *    (Cody–Waite reduction by ln2, 1 + r + r²·(degree-4 polynomial), 2^n applied in two
 *    steps so subnormal results are right); measured max error 0.99 ulp
 *    over [−103, 88.72] on AVX2, AVX-512 and NEON (kernel_rowops_exp_ulp
 *    asserts <= 2). The scalar reference uses libm expf (0.5 ulp).
 *  - sums in RMSNorm / LayerNorm / softmax: scalar accumulates in double,
 *    sequentially; SIMD ISAs accumulate in f32 lanes, 4 accumulators and a
 *    fixed halving tree (order in rowops_simd.h) — relative differences
 *    ~1e-7..1e-6. Everything after the sums (scaling, modulation) uses the
 *    scalar reference's operations in its order, without FMA.
 *  - gated add, GroupNorm apply (without SiLU): bit-identical across ISAs.
 *  - GroupNorm channel sums are in double, per channel, pixels in order, on
 *    every ISA: the statistics are bit-identical across ISAs.
 *  - RoPE rotation is mul, mul, add/sub (no FMA) everywhere: bit-identical
 *    across ISAs for the same input.
 *  - Conversions are exact on every ISA (bit-identical, incl. NaN payloads
 *    as specified by fx_f32_to_f16_bits / fx_f32_to_bf16_bits).
 */
#ifndef FX_ROW_H
#define FX_ROW_H

#include "simd/common/arch.h"
#include "simd/common/table.h"

struct fx_row_kernels {
    const char *name; /* e.g. "avx512 (16 lanes)" */

    /* y = x·r·w, r = 1/sqrt(mean(x²)+eps); w NULL = 1; y may be x. */
    void (*rmsnorm)(int64_t n, const float *x, const float *w, float eps, float *y);
    /* y = (x−mean)·rstd·(1+scale) + shift (two-pass statistics); y may be x. */
    void (*layernorm_modulate)(int64_t n, const float *x, const float *shift,
                               const float *scale, float eps, float *y);
    /* y = x·sigmoid(x); y may be x. */
    void (*silu)(int64_t n, const float *x, float *y);
    /* out = silu(gate)·up; out may alias gate or up. */
    void (*swiglu)(int64_t n, const float *gate, const float *up, float *out);
    /* y += gate ⊙ x (gate NULL = plain add). */
    void (*gated_add)(int64_t n, float *y, const float *gate, const float *x);
    /* in place, max-subtracted. */
    void (*softmax)(int64_t n, float *x);
    /* y = exp(x), the family's transcendental (y may be x). */
    void (*exp)(int64_t n, const float *x, float *y);

    /* GroupNorm: sum[c] += Σ_p x[p, c], sumsq[c] += Σ_p x[p, c]² in double,
     * pixels in order, for x [pixels, channels]. */
    void (*gn_sums)(int64_t pixels, int channels, const float *x, double *sum, double *sumsq);
    /* y[p, c] = (x[p, c] − mean[c])·a[c] + beta[c], then SiLU if silu.
     * Per-channel mean/a/beta were expanded from the group statistics. */
    void (*gn_apply)(int64_t pixels, int channels, const float *x, const float *mean,
                     const float *a, const float *beta, int silu, float *y);

    /* Conversions over n contiguous elements (exact, RNE). */
    void (*bf16_to_f32)(int64_t n, const uint16_t *src, float *dst);
    void (*f32_to_bf16)(int64_t n, const float *src, uint16_t *dst);
    void (*f16_to_f32)(int64_t n, const uint16_t *src, float *dst);
    void (*f32_to_f16)(int64_t n, const float *src, uint16_t *dst);

    /* Rotate one head in place: pairs (2p, 2p+1) or (p, p+pairs) by the
     * angle whose cos/sin are given, for p < pairs. */
    void (*rope)(float *x, int pairs, fx_rope_layout layout, const float *cos, const float *sin);
};

/* The tables. The scalar one always exists. */
extern const struct fx_row_kernels fx_row_scalar;
#if FX_X86
extern const struct fx_row_kernels fx_row_avx2;
extern const struct fx_row_kernels fx_row_avx512;
#endif
#if FX_ARM
extern const struct fx_row_kernels fx_row_neon;
#endif

/* The row table of a kernel context (scalar when the ISA has none). */
static inline const struct fx_row_kernels *fx_row_table(const fx_kctx *kc) {
    return kc && kc->k && kc->k->row ? kc->k->row : &fx_row_scalar;
}

/* Per-ISA entries defined in convert_<isa>.c and rope_<isa>.c, collected
 * into the table in rowops_<isa>.c. */
#define FX_ROW_DECLARE_EXTRAS(isa)                                                      \
    void fx_bf16_to_f32_##isa(int64_t n, const uint16_t *src, float *dst);              \
    void fx_f32_to_bf16_##isa(int64_t n, const float *src, uint16_t *dst);              \
    void fx_f16_to_f32_##isa(int64_t n, const uint16_t *src, float *dst);               \
    void fx_f32_to_f16_##isa(int64_t n, const float *src, uint16_t *dst);               \
    void fx_rope_##isa(float *x, int pairs, fx_rope_layout layout, const float *cos,     \
                       const float *sin)
FX_ROW_DECLARE_EXTRAS(scalar);
#if FX_X86
FX_ROW_DECLARE_EXTRAS(avx2);
FX_ROW_DECLARE_EXTRAS(avx512);
#endif
#if FX_ARM
FX_ROW_DECLARE_EXTRAS(neon);
#endif

/* Work (elements) below which the wrappers stay on one thread: a parallel
 * region costs a few microseconds. Splitting never changes results. */
#define FX_ROW_PARALLEL_MIN 16384

/* Threads for `work` elements: kc->threads, or 1 below `min`. */
static inline int fx_row_threads(const fx_kctx *kc, int64_t work, int64_t min) {
    int t = kc && kc->threads > 0 ? kc->threads : 1;
    return work < min ? 1 : t;
}

#endif
