/*
 * gemm_avx512.c — the AVX-512 f32 GEMM path (FMA): packing, the k step of
 * the 14×32 microkernel (its frame, shared with the bf16 path, is
 * gemm_avx512_common.h), the GEMV kernels, and the avx512 table. The
 * avx512bf16 table reuses this path for f32 and f16 weights (and for bf16
 * weights under FLUX_PRECISION=f32, which selects this table).
 *
 * Register tile 14×32: 28 zmm accumulators (14 rows × 2 vectors of 16
 * output columns), 2 zmm for the B row, 1–2 for the broadcast A element.
 * Per k: 2 aligned B loads + 14 broadcasts feed 28 FMAs (on Zen 4 a zmm FMA
 * is double-pumped, so 28 FMAs take ~28 cycles: load ports stay idle half
 * the time). The last tile of a block uses 4- or 8-row variants.
 * Blocking: KC = 1536 (B micro-panel 192 KiB, reused from L2 by every row
 * of the super-block; A micro-panel 84 KiB streamed), MC = 588 rows per A
 * panel (3.4 MiB, L3), NC = 8192. Long K blocks keep the per-call
 * overhead (loading and storing the C tile) small: the kernel alone runs
 * at 87% of peak with KC = 128, 95% with 768, 97% with 1024; the whole
 * GEMM at 768×9216×3072 gains 3% from KC = 768 to 1536.
 *
 * Packing transposes 16×16 blocks in registers: rows of X / W are
 * contiguous along k, the panels want k-major order. bf16 and f16 weights
 * are widened to f32 here, so the microkernel only sees f32.
 */
#include "gemm_avx512_common.h"
#include "gemm_int8.h"

/* ------------------------------------------------------------------------ */
/* Packing                                                                  */
/* ------------------------------------------------------------------------ */

/* X rows [0, mc) × k [0, kc) → micro-panels [kc][14]. Each transposed
 * column is stored as 16 lanes at stride 14: the 2 extra lanes spill into
 * the next column (rewritten next) or past the block (into the driver's
 * slack). */
static void pack_x(const fx_gemm_path *p, int64_t mc, int64_t kc, const float *x, int64_t ldx,
                   void *dst) {
    (void)p;
    float *d = dst;
    for (int64_t i0 = 0; i0 < mc; i0 += MR, d += kc * MR) {
        const int rows = (int)(mc - i0 < MR ? mc - i0 : MR);
        for (int64_t k0 = 0; k0 < kc; k0 += 16) {
            const __mmask16 km = fx_gemm_mask16(kc - k0);
            __m512i r[16];
#pragma GCC unroll 16
            for (int i = 0; i < 16; i++) /* rows past the block: empty mask, zeros */
                r[i] = _mm512_castps_si512(_mm512_maskz_loadu_ps(i < rows ? km : 0, x + (i < rows ? i0 + i : i0) * ldx + k0));
            fx_gemm_transpose16x16(r);
            /* all 16 columns, also past kc: rewritten by the next
             * micro-panel, or in the driver's slack after the last one */
#pragma GCC unroll 16
            for (int j = 0; j < 16; j++) _mm512_storeu_si512(d + (k0 + j) * MR, r[j]);
        }
    }
}

/* 16 consecutive weights of one row as f32 (lanes outside km are 0). */
static inline __m512 load_w16(const void *w, fx_dtype dt, int64_t idx, __mmask16 km) {
    if (dt == FX_DTYPE_F32) return _mm512_maskz_loadu_ps(km, (const float *)w + idx);
    __m256i h = _mm256_maskz_loadu_epi16(km, (const uint16_t *)w + idx);
    if (dt == FX_DTYPE_BF16) return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    return _mm512_cvtph_ps(h);
}

/* W outputs [0, nc) × k [0, kc) → micro-panels [kc][32] f32. */
static inline __attribute__((always_inline)) void pack_w_any(fx_dtype dt, int64_t nc, int64_t kc,
                                                             const void *w, int64_t ldw, void *dst) {
    float *d = dst;
    for (int64_t j0 = 0; j0 < nc; j0 += NR, d += kc * NR) {
        for (int half = 0; half < 2; half++) {
            const int64_t jh = j0 + half * 16;
            const int rows = (int)(nc - jh < 0 ? 0 : nc - jh < 16 ? nc - jh : 16);
            for (int64_t k0 = 0; k0 < kc; k0 += 16) {
                const __mmask16 km = fx_gemm_mask16(kc - k0);
                __m512i r[16];
#pragma GCC unroll 16
                for (int i = 0; i < 16; i++) /* rows past nc: empty mask, zeros */
                    r[i] = _mm512_castps_si512(load_w16(w, dt, (i < rows ? jh + i : 0) * ldw + k0, i < rows ? km : 0));
                fx_gemm_transpose16x16(r);
                /* all 16 rows, also past kc (see pack_x) */
#pragma GCC unroll 16
                for (int j = 0; j < 16; j++) _mm512_store_si512(d + (k0 + j) * NR + half * 16, r[j]);
            }
        }
    }
}

static void pack_w_f32(const fx_gemm_path *p, int64_t nc, int64_t kc, const void *w, int64_t ldw, void *dst) {
    (void)p;
    pack_w_any(FX_DTYPE_F32, nc, kc, w, ldw, dst);
}
static void pack_w_f16(const fx_gemm_path *p, int64_t nc, int64_t kc, const void *w, int64_t ldw, void *dst) {
    (void)p;
    pack_w_any(FX_DTYPE_F16, nc, kc, w, ldw, dst);
}
static void pack_w_bf16(const fx_gemm_path *p, int64_t nc, int64_t kc, const void *w, int64_t ldw, void *dst) {
    (void)p;
    pack_w_any(FX_DTYPE_BF16, nc, kc, w, ldw, dst);
}

/* ------------------------------------------------------------------------ */
/* Microkernel 14×32                                                        */
/* ------------------------------------------------------------------------ */

/* Row i at one k: A[i][k] broadcast, times the B row (b0, b1). */
#define STEP(i)                                                                                    \
    {                                                                                              \
        const __m512 ai = _mm512_set1_ps(a[i]);                                                    \
        c##i##a = _mm512_fmadd_ps(ai, b0, c##i##a);                                                \
        c##i##b = _mm512_fmadd_ps(ai, b1, c##i##b);                                                \
    }

/* The kernel over ROWS (its frame: gemm_avx512_common.h); per k the B row
 * is 2 aligned loads. */
#define DEFINE_KERNEL(name, ROWS)                                                                  \
    static void name(int64_t ks, const void *a_, const void *b_, const fx_gemm_tile *t) {         \
        const float *a = a_, *b = b_;                                                              \
        KERNEL_BEGIN(ROWS)                                                                         \
        for (int64_t k = 0; k < ks; k++, a += MR, b += NR) {                                       \
            KERNEL_PREFETCH(k)                                                                     \
            const __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);                      \
            ROWS(STEP)                                                                             \
        }                                                                                          \
        KERNEL_END(ROWS)                                                                           \
    }

DEFINE_KERNEL(kernel_rows14, ROWS14)
DEFINE_KERNEL(kernel_rows8, ROWS8)
DEFINE_KERNEL(kernel_rows4, ROWS4)

/* ------------------------------------------------------------------------ */
/* GEMV (m <= 4), f32 FMA: the microkernel of gemm_gemv.h's loops           */
/* ------------------------------------------------------------------------ */

/* Rows [j, j+R) of W against all M rows of X: M×R accumulators along k,
 * each reduced by a fixed tree at the end. */
static inline __attribute__((always_inline)) void gemv_tile(const int M, const int R, fx_dtype dt, int64_t j,
                                                            int64_t k, const float *x, int64_t ldx,
                                                            const fx_weight *w, float *y, int64_t ldy,
                                                            const fx_epilogue *epi) {
    __m512 acc[4][4];
#pragma GCC unroll 4
    for (int i = 0; i < M; i++)
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) acc[i][r] = _mm512_setzero_ps();
    for (int64_t q = 0; q < k; q += 16) {
        const __mmask16 km = fx_gemm_mask16(k - q);
        __m512 wv[4], xv[4];
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) wv[r] = load_w16(w->data, dt, (j + r) * w->ld + q, km);
#pragma GCC unroll 4
        for (int i = 0; i < M; i++) xv[i] = _mm512_maskz_loadu_ps(km, x + i * ldx + q);
#pragma GCC unroll 4
        for (int i = 0; i < M; i++)
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) acc[i][r] = _mm512_fmadd_ps(xv[i], wv[r], acc[i][r]);
    }
#pragma GCC unroll 4
    for (int i = 0; i < M; i++)
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) fx_gemm_epi_scalar(epi, j + r, _mm512_reduce_add_ps(acc[i][r]), y + i * ldy + j + r);
}

#include "gemm_gemv.h"

FX_GEMV_ENTRY(fx_gemv_avx512_f32, FX_DTYPE_F32)
FX_GEMV_ENTRY(fx_gemv_avx512_f16, FX_DTYPE_F16)
FX_GEMV_ENTRY(fx_gemv_avx512_bf16, FX_DTYPE_BF16)

/* ------------------------------------------------------------------------ */
/* The avx512 table                                                         */
/* ------------------------------------------------------------------------ */

const fx_gemm_path fx_gemm_avx512_f32_path = {
    .name = "avx512 f32 14x32",
    .mr = MR, .nr = NR,
    .kc = 1536, .mc = 588, .nc = 8192,
    .kpair = 1, .elem = 4,
    .pack_x = pack_x,
    .pack_w = {pack_w_f32, pack_w_f16, pack_w_bf16},
    .kernel = kernel_14x32,
    .kernel_prefetches = 1,
};

const fx_gemm_kernels fx_gemm_avx512 = {
    .name = "avx512",
    .path = {&fx_gemm_avx512_f32_path, &fx_gemm_avx512_f32_path, &fx_gemm_avx512_f32_path},
    .gemv = {fx_gemv_avx512_f32, fx_gemv_avx512_f16, fx_gemv_avx512_bf16},
    .gemv_bf16_dot = 0,
    .int8 = fx_gemm_int8_avx512,
};
