/*
 * gemm_avx512bf16.c — the bf16 dot-product GEMM path (vdpbf16ps) for bf16
 * weights, its GEMV, and the avx512bf16 table (f32 and f16 weights use the
 * avx512 f32 path).
 *
 * vdpbf16ps c, a, b: c[l] += a[2l]·b[2l] + a[2l+1]·b[2l+1] for 16 f32 lanes,
 * so both operands are packed as bf16 *pairs* (k, k+1) in 32-bit slots:
 *   A micro-panel [kc/2][14] pairs: X rounded to bf16 (RNE) while packing
 *   B micro-panel [kc/2][32] pairs: W copied, pair-interleaved across outputs
 * An odd K gets a zero partner in its last pair on both sides.
 *
 * Register tile 14×32 as in the f32 path (the frame of the microkernel is
 * gemm_avx512_common.h): 28 zmm accumulators, 2 B vectors, one broadcast
 * pair per row. Per k-pair: 2 loads + 14 broadcasts feed 28 vdpbf16ps
 * (1/cycle/core on Zen 4: 64 flops per cycle). The last tile of a block
 * uses 4- or 8-row variants. Blocking: KC = 1536 (B micro-panel
 * 96 KiB, reused from L2 by every row of the super-block; A micro-panel
 * 42 KiB streamed), MC = 588 rows per A panel (1.7 MiB, L3), NC = 8192.
 * Measured kernel alone on Zen 4: 87% of peak at KC = 256, 98% at 3072.
 *
 * Numerics: products of two bf16 are exact in f32; the accumulation rounds
 * to nearest even in f32 per step (denormal inputs/outputs are flushed by
 * the instruction). X is rounded to bf16 (8 significant bits) by the
 * packing, which is the dominant error (relative 2⁻⁹ per element).
 */
#include "gemm_avx512_common.h"
#include "gemm_int8.h"

/* ------------------------------------------------------------------------ */
/* Packing                                                                  */
/* ------------------------------------------------------------------------ */

/* 32 consecutive X values (lanes past n are 0) → 16 bf16 pairs. */
static inline __m512i x_pairs(const float *x, int64_t n) {
    __m512 lo = _mm512_maskz_loadu_ps(fx_gemm_mask16(n), x);
    __m512 hi = _mm512_maskz_loadu_ps(fx_gemm_mask16(n - 16), x + 16);
    return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
}

/* X rows [0, mc) × k [0, kc) → micro-panels [ceil(kc/2)][14] pairs. Each
 * transposed pair column is stored as 16 lanes at stride 14 (the 2 extra
 * lanes are rewritten next, or land in the driver's slack). */
static void pack_x(const fx_gemm_path *p, int64_t mc, int64_t kc, const float *x, int64_t ldx,
                   void *dst) {
    (void)p;
    const int64_t kp = (kc + 1) / 2;
    uint32_t *d = dst;
    for (int64_t i0 = 0; i0 < mc; i0 += MR, d += kp * MR) {
        const int rows = (int)(mc - i0 < MR ? mc - i0 : MR);
        for (int64_t k0 = 0; k0 < kc; k0 += 32) {
            __m512i r[16];
#pragma GCC unroll 16
            for (int i = 0; i < 16; i++) {
                /* rows past the block read row 0 with an empty mask: zeros */
                const float *src = x + (i < rows ? i0 + i : i0) * ldx + k0;
                r[i] = x_pairs(src, i < rows ? kc - k0 : 0);
            }
            fx_gemm_transpose16x16(r);
            /* all 16 pair columns, also past kp: rewritten by the next
             * micro-panel, or in the driver's slack after the last one */
            const int64_t q0 = k0 / 2;
#pragma GCC unroll 16
            for (int j = 0; j < 16; j++) _mm512_storeu_si512(d + (q0 + j) * MR, r[j]);
        }
    }
}

/* W outputs [0, nc) × k [0, kc), bf16 → micro-panels [ceil(kc/2)][32] pairs
 * (the driver has prefetched these rows while computing the previous one). */
static void pack_w(const fx_gemm_path *p, int64_t nc, int64_t kc, const void *w, int64_t ldw, void *dst) {
    (void)p;
    const uint16_t *src = w;
    const int64_t kp = (kc + 1) / 2;
    uint32_t *d = dst;
    for (int64_t j0 = 0; j0 < nc; j0 += NR, d += kp * NR) {
        for (int half = 0; half < 2; half++) {
            const int64_t jh = j0 + half * 16;
            const int rows = (int)(nc - jh < 0 ? 0 : nc - jh < 16 ? nc - jh : 16);
            for (int64_t k0 = 0; k0 < kc; k0 += 32) {
                const __mmask32 km = fx_gemm_mask32(kc - k0);
                __m512i r[16];
#pragma GCC unroll 16
                for (int i = 0; i < 16; i++)
                    r[i] = _mm512_maskz_loadu_epi16(i < rows ? km : 0, src + (i < rows ? jh + i : 0) * ldw + k0);
                fx_gemm_transpose16x16(r);
                /* all 16 pair rows, also past kp (see pack_x) */
                uint32_t *o = d + k0 / 2 * NR + half * 16;
#pragma GCC unroll 16
                for (int j = 0; j < 16; j++) _mm512_store_si512(o + j * NR, r[j]);
            }
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Microkernel 14×32, vdpbf16ps                                             */
/* ------------------------------------------------------------------------ */

/* Row i at one k-pair: the A pair broadcast, dot with the B pairs (b0, b1). */
#define STEP(i)                                                                                    \
    {                                                                                              \
        const __m512bh ai = (__m512bh)_mm512_set1_epi32(a[i]);                                     \
        c##i##a = _mm512_dpbf16_ps(c##i##a, ai, b0);                                               \
        c##i##b = _mm512_dpbf16_ps(c##i##b, ai, b1);                                               \
    }

/* The kernel over ROWS (its frame: gemm_avx512_common.h); per k-pair the
 * B row is 2 aligned loads of 16 pairs. */
#define DEFINE_KERNEL(name, ROWS)                                                                  \
    static void name(int64_t ks, const void *a_, const void *b_, const fx_gemm_tile *t) {         \
        const int32_t *a = a_;                                                                     \
        const __m512i *b = b_;                                                                     \
        KERNEL_BEGIN(ROWS)                                                                         \
        for (int64_t k = 0; k < ks; k++, a += MR, b += 2) {                                        \
            KERNEL_PREFETCH(k)                                                                     \
            const __m512bh b0 = (__m512bh)_mm512_load_si512(b), b1 = (__m512bh)_mm512_load_si512(b + 1); \
            ROWS(STEP)                                                                             \
        }                                                                                          \
        KERNEL_END(ROWS)                                                                           \
    }

DEFINE_KERNEL(kernel_rows14, ROWS14)
DEFINE_KERNEL(kernel_rows8, ROWS8)
DEFINE_KERNEL(kernel_rows4, ROWS4)

/* ------------------------------------------------------------------------ */
/* GEMV (m <= 4) with vdpbf16ps, the microkernel of gemm_gemv.h's loops:    */
/* xb is X in bf16, rows round_up(k, 32) apart                              */
/* ------------------------------------------------------------------------ */

static inline __attribute__((always_inline)) void gemv_tile(const int M, const int R, fx_dtype dt, int64_t j,
                                                            int64_t k, const uint16_t *xb, int64_t ldxb,
                                                            const fx_weight *w, float *y, int64_t ldy,
                                                            const fx_epilogue *epi) {
    (void)dt; /* bf16 weights only */
    const uint16_t *wd = w->data;
    __m512 acc[4][4];
#pragma GCC unroll 4
    for (int i = 0; i < M; i++)
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) acc[i][r] = _mm512_setzero_ps();
    for (int64_t q = 0; q < k; q += 32) {
        const __mmask32 km = fx_gemm_mask32(k - q);
        __m512bh wv[4], xv[4];
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) wv[r] = (__m512bh)_mm512_maskz_loadu_epi16(km, wd + (j + r) * w->ld + q);
#pragma GCC unroll 4
        for (int i = 0; i < M; i++) xv[i] = (__m512bh)_mm512_loadu_si512(xb + i * ldxb + q);
#pragma GCC unroll 4
        for (int i = 0; i < M; i++)
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) acc[i][r] = _mm512_dpbf16_ps(acc[i][r], xv[i], wv[r]);
    }
#pragma GCC unroll 4
    for (int i = 0; i < M; i++)
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) fx_gemm_epi_scalar(epi, j + r, _mm512_reduce_add_ps(acc[i][r]), y + i * ldy + j + r);
}

#define FX_GEMV_X uint16_t
#include "gemm_gemv.h"

static void gemv_bf16_dot(int64_t m, int64_t n0, int64_t n1, int64_t k, const float *x, int64_t ldx,
                          const uint16_t *xb, const fx_weight *w, float *y, int64_t ldy, const fx_epilogue *epi) {
    (void)x, (void)ldx;
    gemv_rows(FX_DTYPE_BF16, m, n0, n1, k, xb, (k + 31) / 32 * 32, w, y, ldy, epi);
}

/* ------------------------------------------------------------------------ */
/* The avx512bf16 table                                                     */
/* ------------------------------------------------------------------------ */

static const fx_gemm_path bf16_path = {
    .name = "avx512bf16 bf16-dot 14x32",
    .mr = MR, .nr = NR,
    .kc = 1536, .mc = 588, .nc = 8192,
    .kpair = 2, .elem = 2,
    .pack_x = pack_x,
    .pack_w = {NULL, NULL, pack_w},
    .kernel = kernel_14x32,
    .kernel_prefetches = 1,
};

const fx_gemm_kernels fx_gemm_avx512bf16 = {
    .name = "avx512bf16",
    .path = {&fx_gemm_avx512_f32_path, &fx_gemm_avx512_f32_path, &bf16_path},
    .gemv = {fx_gemv_avx512_f32, fx_gemv_avx512_f16, gemv_bf16_dot},
    .gemv_bf16_dot = 1,
    .int8 = fx_gemm_int8_avx512,
};
