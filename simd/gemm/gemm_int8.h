/*
 * gemm_int8.h — the int8 (W8A8) GEMM of --precision int8 (gemm_int8.c, the
 * driver; gemm_int8_<isa>.c, the kernels), simd-internal. fx_linear
 * (linear.c) routes block-typed weights here when kc->int8; the gemm tables
 * (gemm.h) name each ISA's kernel chooser.
 */
#ifndef FX_GEMM_INT8_H
#define FX_GEMM_INT8_H

#include "gemm.h"

/* Weights: the per-channel int8 form (kernels.h fx_int8w), read in place:
 * MR output rows (channels) at a time, row stride ldq = round_up(k, 64)
 * bytes. X: quantized per row (codes and one f32 scale each) and packed
 * once per call into panels of NR rows (tokens): [ldq/4][NR][4], the 4
 * codes of a k-quad of one token together (the AMX B tile's layout);
 * kernels with x_u8 get code + 128 as unsigned bytes (vpdpbusd's unsigned
 * operand) and subtract 128·sum[j] from the dot. Padding tokens are zero
 * codes with scale 0. A kernel call runs the whole K for its MR × NR tile
 * with exact int32 sums d[j][i] = Σ_k codeW[j]·codeX[i], then the
 * epilogue fx_int8_epi_c describes (every ISA: the same operations). */
typedef struct fx_int8_tile {
    float *y;               /* at (token i0, channel j0) */
    int64_t ldy;
    int m, n;               /* valid tokens (rows of y) / channels (columns of y) */
    const float *sx;        /* [NR] token scales (0 past m) */
    const float *sw;        /* [MR] channel scales (0 past n) */
    const int32_t *wsum;    /* [MR] channel code sums */
    fx_epilogue_mode mode;
    const float *bias, *gate; /* at column j0, or NULL */
} fx_int8_tile;
/* kq: quads of k (ldq / 4); w: MR weight rows, ldw bytes apart; x: one
 * packed panel. */
typedef void (*fx_int8_kernel_fn)(int64_t kq, const int8_t *w, int64_t ldw, const uint8_t *x, const fx_int8_tile *t);
typedef struct fx_gemm_int8 {
    const char *name;
    int mr, nr;             /* channels × tokens per call; mr divides 32 */
    fx_int8_kernel_fn kernel;
    int x_u8;               /* 1: X packed as code + 128 */
    /* run by every thread before its first / after its last kernel call
     * (the AMX tile configuration); NULL: nothing */
    void (*thread_begin)(void), (*thread_end)(void);
} fx_gemm_int8;

/* The epilogue of one output from its int32 dot d (already without the
 * u8 offset): v = ((float)d · sw_j) · sx_i, then + bias_j when there is a
 * bias, then store / c + v / fma(gate_j, v, c). Every kernel does exactly
 * these operations per element (vectorized or not). */
static inline void fx_int8_epi_c(const fx_int8_tile *t, int i, int j, int32_t d) {
    float v = (float)d * t->sw[j];
    v = v * t->sx[i];
    if (t->bias) v = v + t->bias[j];
    float *c = t->y + i * t->ldy + j;
    if (t->mode == FX_EPI_STORE) *c = v;
    else if (t->mode == FX_EPI_ACCUMULATE) *c = *c + v;
    else *c = fmaf(t->gate[j], v, *c);
}
/* The epilogue of a tile of dots d[j·ldd + i] (channel-major); u8: the
 * dots still hold 128·wsum[j]. */
static inline void fx_int8_finish_c(const int32_t *d, int64_t ldd, int u8, const fx_int8_tile *t) {
    for (int i = 0; i < t->m; i++)
        for (int j = 0; j < t->n; j++) fx_int8_epi_c(t, i, j, d[j * ldd + i] - (u8 ? 128 * t->wsum[j] : 0));
}

/* The int8 GEMM: from form f (of w), or with f NULL w's blocks converted
 * per call panel by panel; kernel p (NULL: the table's for m rows on this
 * CPU, else scalar). Returns 0 when done; -1 when it did not run (scratch
 * memory unavailable, or K too long for exact int32 sums): nothing
 * written, the caller takes the weight-only path. */
int fx_linear_int8(const fx_kctx *kc, const fx_gemm_int8 *p, int64_t m, const float *x, int64_t ldx,
                   const fx_weight *w, const fx_int8w *f, float *y, int64_t ldy, const fx_epilogue *epi);

extern const fx_gemm_int8 fx_gemm_int8_scalar;

/* AMX-INT8 tiles from this many rows of X (fewer: the AVX-512 kernel) */
#define FX_INT8_AMX_MIN_M 16

#if FX_X86
/* int8 kernels: vpmaddubsw (AVX2), ymm vpdpbusd (AVX-VNNI), zmm vpdpbusd
 * (AVX512-VNNI), TDPBSSD (AMX); the choosers of the avx2, avx512 (and
 * avx512bf16) and amx tables */
extern const fx_gemm_int8 fx_gemm_int8_avx2_kernel, fx_gemm_int8_avxvnni, fx_gemm_int8_avx512vnni, fx_gemm_int8_amx;
const fx_gemm_int8 *fx_gemm_int8_avx2(const fx_cpu_facts *f, int64_t m);
const fx_gemm_int8 *fx_gemm_int8_avx512(const fx_cpu_facts *f, int64_t m);
const fx_gemm_int8 *fx_gemm_int8_amx_choose(const fx_cpu_facts *f, int64_t m);
#endif

#if FX_ARM
/* sdot (ARMv8.2 dotprod, when the CPU has it) or widening multiplies */
extern const fx_gemm_int8 fx_gemm_int8_neon_dot, fx_gemm_int8_neon_base;
const fx_gemm_int8 *fx_gemm_int8_neon(const fx_cpu_facts *f, int64_t m);
#endif

#endif
