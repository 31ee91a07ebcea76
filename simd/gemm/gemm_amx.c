/*
 * gemm_amx.c — the AMX-BF16 GEMM path (bf16 weights, m > 4 rows) and
 * the amx gemm table. The BLIS loops, threading and K blocking are
 * gemm.c's; here the microkernel is 2×2 tiles:
 *
 *   C [32][32] f32 = 4 tiles (tmm0..3) = A [32 rows][k] · B [k][32 cols]
 *   per step of k = 32: A rows 0-15, 16-31 (tmm4, 5: 16 rows × 32 bf16),
 *   B columns 0-15, 16-31 (tmm6, 7: 16 pair rows × 16 columns), 4
 *   TDPBF16PS = 32·32·32 MACs from 4 KiB of tile loads.
 *
 * Packed layouts (tiles 1 KiB each, loaded with a 64-byte stride):
 *   A micro-panel  [ceil(kc/32)][32 rows][32 bf16]: X rounded to bf16 (RNE,
 *                  vcvtne2ps2bf16), zero rows past m and zeros past kc;
 *                  converted per (row block, K block) by each thread.
 *   B micro-panel  [ceil(kc/32)][2 halves][16 pair rows][16 columns]: the
 *                  dword (W[n][k0+2r], W[n][k0+2r+1]) at row r, column n:
 *                  a 16×16 transpose of W's dwords; zeros past n and kc.
 *                  Packing is costly next to the tiles, so with a
 *                  fx_packcache the whole weight is packed once (prepack)
 *                  and every later call reads it in place.
 * Edge tiles are inside the kernel: rows and columns past the tile's m and
 * n are computed on zero padding and never written; m <= 16 or n <= 16
 * runs 2×1, 1×2 or 1×1 tiles. The tiles are stored to a 4 KiB scratch and
 * the AVX-512 epilogue adds the partial sums of earlier K blocks, the bias,
 * and stores / accumulates / gates (fx_gemm_write_row, as the AVX-512 paths).
 *
 * Tile state: each thread loads the one palette (8 tiles × 16 × 64 B)
 * before its first kernel call of a GEMM or conv and releases it after
 * its last (the path's thread_begin / thread_end, called by the drivers).
 *
 * Numerics: as the avx512bf16 path — X rounded to bf16, products exact in
 * f32, sums in f32 with round to nearest even, denormals flushed — but the
 * order is the tile unit's (two partial sums per output and 32-long
 * chunks of k), so results differ in the last bits from avx512bf16.
 * Deterministic and independent of the thread count (gemm.h).
 *
 * Blocking (derived from the 2 MiB L2 of Sapphire Rapids, not measured —
 * no AMX machine was available): KC = 3072 (one K block for most model
 * weights; B micro-panel 192 KiB), MC = 256 (A panel 1.5 MiB), NC = 8192.
 *
 * Which m: every m the blocked GEMM gets (m > FX_GEMV_MAX_M; the GEMV keeps
 * m <= 4 on AVX-512 FMA). Not only m >= 16: a batch stacks its sequences
 * through the GEMMs, so a higher threshold would put a small image's
 * tokens on f32 alone and on tiles in a batch, and an image of a batch
 * would no longer be exactly its single run (README, -n). Below 16 rows
 * the tiles are partly padding, yet (derived) at m = 5 they still peak at
 * 5/16 · 1024 = 320 FLOP/cycle against 64 for AVX-512 FMA, and read the
 * packed weight in place where the f32 path widens W on every call.
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
 * [ceil(kc/32)][2][16][16] dwords. Writes exactly the micro-panels (no
 * slack), as prepacking into the fx_packcache requires. */
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
/* The amx table                                                            */
/* ------------------------------------------------------------------------ */

static const fx_gemm_path amx_path = {
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
    .prepack = 1,
};

/* f32 and f16 weights keep f32 math (AVX-512 FMA); m <= 4 uses the
 * AVX-512 GEMVs (bandwidth-bound; bf16 widened: vdpbf16ps is half rate on
 * Intel). */
const fx_gemm_kernels fx_gemm_amx = {
    .name = "amx",
    .path = {&fx_gemm_avx512_f32_path, &fx_gemm_avx512_f32_path, &amx_path},
    .gemv = {fx_gemv_avx512_f32, fx_gemv_avx512_f16, fx_gemv_avx512_bf16},
    .gemv_bf16_dot = 0,
    .int8 = fx_gemm_int8_amx_choose,
};
