/*
 * gemm_packed_amx.c — the AMX-BF16 path with both operands packed (the
 * fx_gemm_path of the amx table for bf16 weights): the microkernel that
 * conv2d's implicit GEMM runs on (simd/conv/conv2d.c packs the layer's
 * weight once per call into these B micro-panels and gathers A tiles from
 * the input). Linear layers do not use it: their driver reads the weights
 * in place (gemm_amx.c). 2×2 tiles:
 *
 *   C [32][32] f32 = 4 tiles (tmm0..3) = A [32 rows][k] · B [k][32 cols]
 *   per step of k = 32: A rows 0-15, 16-31 (tmm4, 5: 16 rows × 32 bf16),
 *   B columns 0-15, 16-31 (tmm6, 7: 16 pair rows × 16 columns), 4
 *   TDPBF16PS = 32·32·32 MACs from 4 KiB of tile loads.
 *
 * Packed layouts (tiles 1 KiB each, loaded with a 64-byte stride):
 *   A micro-panel  [ceil(kc/32)][32 rows][32 bf16]: X rounded to bf16 (RNE,
 *                  vcvtne2ps2bf16), zero rows past m and zeros past kc.
 *   B micro-panel  [ceil(kc/32)][2 halves][16 pair rows][16 columns]: the
 *                  dword (W[n][k0+2r], W[n][k0+2r+1]) at row r, column n:
 *                  a 16×16 transpose of W's dwords; zeros past n and kc.
 * Edge tiles are inside the kernel: rows and columns past the tile's m and
 * n are computed on zero padding and never written; m <= 16 or n <= 16
 * runs 2×1, 1×2 or 1×1 tiles. The tiles are stored to a 4 KiB scratch and
 * the AVX-512 epilogue adds the partial sums of earlier K blocks, the bias,
 * and stores / accumulates / gates (fx_gemm_write_row, as the AVX-512 paths).
 *
 * Tile state: each thread loads the one palette (8 tiles × 16 × 64 B)
 * before its first kernel call of a conv and releases it after its last
 * (the path's thread_begin / thread_end, called by the drivers).
 *
 * Numerics: X rounded to bf16, products exact in f32, sums in f32 with
 * round to nearest even, denormals flushed, in the tile unit's order (two
 * partial sums per output and 32-long chunks of k): the same sums as the
 * linear driver's for the same K.
 *
 * Blocks (kc 3072, mc 256, nc 8192): what gemm.c's loops would use; conv2d
 * runs the whole K per call and blocks the pixels itself.
 */
#include "gemm_avx512_util.h"
#include "simd/common/amx.h"

enum { MR = 32, NR = 32, TILE_BYTES = 1024 };

/* ------------------------------------------------------------------------ */
/* Packing                                                                  */
/* ------------------------------------------------------------------------ */

/* 32 consecutive X values (n valid, zeros past) → 32 bf16 in order. */
static inline __m512i x_bf16_32(const float *x, int64_t n) {
    const __m512 lo = _mm512_maskz_loadu_ps(fx_gemm_mask16(n), x);
    const __m512 hi = _mm512_maskz_loadu_ps(fx_gemm_mask16(n - 16), x + 16);
    return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
}

/* X rows [0, mc) × k [0, kc) → micro-panels [ceil(kc/32)][32][32] bf16. */
static void pack_x(const fx_gemm_path *p, int64_t mc, int64_t kc, const float *x, int64_t ldx, void *dst) {
    (void)p;
    const int64_t ks = (kc + 31) / 32;
    uint16_t *d = dst;
    for (int64_t i0 = 0; i0 < mc; i0 += MR, d += ks * MR * 32) {
        const int rows = (int)(mc - i0 < MR ? mc - i0 : MR);
        for (int i = 0; i < MR; i++) {
            const float *src = x + (i < rows ? i0 + i : i0) * ldx;
            for (int64_t s = 0; s < ks; s++)
                _mm512_store_si512(d + (s * MR + i) * 32,
                                   i < rows ? x_bf16_32(src + s * 32, kc - s * 32) : _mm512_setzero_si512());
        }
    }
}

/* W outputs [0, nc) × k [0, kc), bf16 → micro-panels of NR outputs, each
 * [ceil(kc/32)][2][16][16] dwords (exactly the micro-panels, no slack). */
static void pack_w(const fx_gemm_path *p, int64_t nc, int64_t kc, const void *w, int64_t ldw, void *dst) {
    (void)p;
    const uint16_t *src = w;
    const int64_t ks = (kc + 31) / 32;
    uint32_t *d = dst;
    for (int64_t j0 = 0; j0 < nc; j0 += NR, d += ks * NR * 16) {
        for (int half = 0; half < 2; half++) {
            const int64_t jh = j0 + half * 16;
            const int rows = (int)(nc - jh < 0 ? 0 : nc - jh < 16 ? nc - jh : 16);
            for (int64_t s = 0; s < ks; s++) {
                const __mmask32 km = fx_gemm_mask32(kc - s * 32);
                __m512i r[16];
#pragma GCC unroll 16
                for (int i = 0; i < 16; i++) /* outputs past nc: empty mask, zeros */
                    r[i] = _mm512_maskz_loadu_epi16(i < rows ? km : 0, src + (i < rows ? jh + i : 0) * ldw + s * 32);
                fx_gemm_transpose16x16(r); /* r[q] = pair row q of the 16 outputs */
                uint32_t *o = d + (s * 2 + half) * 256;
#pragma GCC unroll 16
                for (int q = 0; q < 16; q++) _mm512_store_si512(o + q * 16, r[q]);
            }
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Microkernel: 2×2 tiles (or 2×1, 1×2, 1×1 at the edges)                  */
/* ------------------------------------------------------------------------ */

/* c [32][32] f32 = A micro-panel · B micro-panel over ks steps of 32 k;
 * two_m / two_n: the second row / column block is needed. */
static inline __attribute__((always_inline)) void tile_product(const int two_m, const int two_n, int64_t ks,
                                                               const char *a, const char *b, float *c) {
    FX_TILES_2X2_ZERO(two_m, two_n);
    for (int64_t s = 0; s < ks; s++, a += 2 * TILE_BYTES, b += 2 * TILE_BYTES)
        FX_TILES_2X2_DP(FX_TDPBF16PS, two_m, two_n, a, a + TILE_BYTES, 64, b, b + TILE_BYTES, 64);
    FX_TILES_2X2_STORE(two_m, two_n, c, NR);
}

static void kernel(int64_t ks, const void *a, const void *b, const fx_gemm_tile *t) {
    _Alignas(64) float c[MR * NR];
    if (t->m > 16 && t->n > 16) tile_product(1, 1, ks, a, b, c);
    else if (t->m > 16) tile_product(1, 0, ks, a, b, c);
    else if (t->n > 16) tile_product(0, 1, ks, a, b, c);
    else tile_product(0, 0, ks, a, b, c);
    /* the epilogue on the rows and columns the tile owns; c holds only
     * the computed blocks, the masks keep the rest unread */
    const __mmask16 k0 = fx_gemm_mask16(t->n), k1 = fx_gemm_mask16(t->n - 16);
    __m512 bias0 = _mm512_setzero_ps(), bias1 = bias0, g0 = bias0, g1 = bias0;
    if (t->last && t->bias)
        bias0 = _mm512_maskz_loadu_ps(k0, t->bias), bias1 = _mm512_maskz_loadu_ps(k1, t->bias + 16);
    if (t->last && t->mode == FX_EPI_GATED_ACCUMULATE)
        g0 = _mm512_maskz_loadu_ps(k0, t->gate), g1 = _mm512_maskz_loadu_ps(k1, t->gate + 16);
    for (int i = 0; i < t->m; i++) {
        __m512 v0 = _mm512_maskz_loadu_ps(k0, c + i * NR), v1 = _mm512_maskz_loadu_ps(k1, c + i * NR + 16);
        if (!t->first) {
            v0 = _mm512_add_ps(_mm512_maskz_loadu_ps(k0, t->partial + i * t->ldp), v0);
            v1 = _mm512_add_ps(_mm512_maskz_loadu_ps(k1, t->partial + i * t->ldp + 16), v1);
        }
        fx_gemm_write_row(t, i, v0, v1, k0, k1, bias0, bias1, g0, g1);
    }
}

/* ------------------------------------------------------------------------ */
/* The path                                                                 */
/* ------------------------------------------------------------------------ */

const fx_gemm_path fx_gemm_amx_packed_path = {
    .name = "amx bf16 tiles 32x32",
    .mr = MR, .nr = NR,
    .kc = 3072, .mc = 256, .nc = 8192,
    .kpair = 32, .elem = 2,
    .pack_x = pack_x,
    .pack_w = {NULL, NULL, pack_w},
    .kernel = kernel,
    .kernel_prefetches = 0,
    .thread_begin = fx_amx_tiles_begin,
    .thread_end = fx_amx_tiles_end,
};
