/*
 * gemm_avx512_common.h — the frame of the AVX-512 14×32 microkernel shared
 * by the f32 FMA path (gemm_avx512.c) and the bf16 dot-product path
 * (gemm_avx512bf16.c): the accumulators (zeroed, or loaded from the
 * partial sums of the earlier K blocks), the weight prefetches spread over
 * the k loop, the fused write-back with bias / gate, and the choice of a 4-,
 * 8- or 14-row variant for the last tile of a block. The k loop itself
 * (typed A and B pointers, the B row loads, STEP(i)) stays in each path's
 * DEFINE_KERNEL, which puts KERNEL_BEGIN(ROWS) before the loop,
 * KERNEL_PREFETCH(k) first in it and KERNEL_END(ROWS) after it, and defines
 * kernel_rows14, kernel_rows8 and kernel_rows4. AVX-512F only, so it
 * compiles under the flags of either file.
 *
 * Register tile: 14 rows × 2 vectors of 16 output columns = 28 zmm
 * accumulators c<i>a, c<i>b.
 */
#ifndef FX_GEMM_AVX512_COMMON_H
#define FX_GEMM_AVX512_COMMON_H

#include "gemm_avx512_util.h"

enum { MR = 14, NR = 32 };

/* Row lists: the full tile and two shorter ones for the last tile of a
 * block (m <= 4 or m <= 8 rows: e.g. 256 = 18·14 + 4), so a partial tile
 * does not pay for 14 rows. */
#define ROWS14(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13)
#define ROWS8(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
#define ROWS4(X) X(0) X(1) X(2) X(3)

#define DECL(i) __m512 c##i##a, c##i##b;
#define ZERO(i) c##i##a = c##i##b = _mm512_setzero_ps();
#define LOAD(i)                                                                                    \
    c##i##a = i < m ? _mm512_maskz_loadu_ps(k0, pp + i * ldp) : _mm512_setzero_ps();               \
    c##i##b = i < m ? _mm512_maskz_loadu_ps(k1, pp + i * ldp + 16) : _mm512_setzero_ps();
#define WRITE(i) fx_gemm_write_row(t, i, c##i##a, c##i##b, k0, k1, bias0, bias1, g0, g1);

/* Column masks k0, k1 of the tile's n columns; the accumulators of ROWS,
 * zeroed on the first K block, else loaded from the partial sums (rows
 * past t->m zero); the prefetch schedule (one prefetch every pf_every k). */
#define KERNEL_BEGIN(ROWS)                                                                         \
    const __mmask16 k0 = fx_gemm_mask16(t->n), k1 = fx_gemm_mask16(t->n - 16);                     \
    ROWS(DECL)                                                                                     \
    if (t->first) {                                                                                \
        ROWS(ZERO)                                                                                 \
    } else {                                                                                       \
        const float *pp = t->partial;                                                              \
        const int64_t ldp = t->ldp;                                                                \
        const int m = t->m;                                                                        \
        ROWS(LOAD)                                                                                 \
    }                                                                                              \
    fx_gemm_prefetch *pf = t->pf;                                                                  \
    const int64_t pf_every = fx_gemm_prefetch_every(pf, ks);                                       \
    int64_t pf_next = pf_every;

/* At step k of the k loop: the next weight prefetch when it is due. */
#define KERNEL_PREFETCH(k)                                                                         \
    if ((k) == pf_next) pf_next += pf_every, fx_gemm_prefetch_one(pf);

/* The fused write-back: bias and gate on the last K block only. */
#define KERNEL_END(ROWS)                                                                           \
    __m512 bias0 = _mm512_setzero_ps(), bias1 = bias0, g0 = bias0, g1 = bias0;                     \
    if (t->last && t->bias)                                                                        \
        bias0 = _mm512_maskz_loadu_ps(k0, t->bias), bias1 = _mm512_maskz_loadu_ps(k1, t->bias + 16); \
    if (t->last && t->mode == FX_EPI_GATED_ACCUMULATE)                                             \
        g0 = _mm512_maskz_loadu_ps(k0, t->gate), g1 = _mm512_maskz_loadu_ps(k1, t->gate + 16);     \
    ROWS(WRITE)

/* The path's kernels over ROWS14, ROWS8 and ROWS4 (the A micro-panel keeps
 * its 14-row stride in all three). */
static void kernel_rows14(int64_t ks, const void *a, const void *b, const fx_gemm_tile *t);
static void kernel_rows8(int64_t ks, const void *a, const void *b, const fx_gemm_tile *t);
static void kernel_rows4(int64_t ks, const void *a, const void *b, const fx_gemm_tile *t);

/* The path's microkernel: the shortest row variant that covers t->m. */
static void kernel_14x32(int64_t ks, const void *a, const void *b, const fx_gemm_tile *t) {
    if (t->m <= 4) kernel_rows4(ks, a, b, t);
    else if (t->m <= 8) kernel_rows8(ks, a, b, t);
    else kernel_rows14(ks, a, b, t);
}

#endif
