/*
 * gemm_int8_amx.c — the AMX-INT8 kernel of the W8A8 GEMM (gemm_int8.c):
 * 32 rows × 32 columns in 2×2 tiles of TDPBSSD (s8·s8: both our operands
 * are signed, so no offset is needed); and the int8 choice of the amx
 * table.
 *
 *   per 32-block: C (tmm0..3, 16×16 int32 each) = 0, then
 *     A rows 0-15, 16-31 → tmm4, 5: 16 rows × 32 bytes of the A tile
 *       [k/32][32][32] (the driver's a_rows layout; stride 32 bytes)
 *     B columns 0-15, 16-31 → tmm6, 7: 8 quad rows × 16 columns of the
 *       driver's B [8][32][4] (stride 128 bytes, the second half at +64):
 *       already the tile's 4-bytes-of-k-per-column layout, no repack
 *     4 TDPBSSD, one K = 32 step each (the block is the scale's unit)
 *   the int32 tiles are stored to L1, and AVX-512 converts them (exactly)
 *   and fused-multiply-adds them with the columns' block scales into f32
 *   sums, in block order as every int8 kernel: the same bits.
 * Edge tiles as gemm_amx.c: row / column blocks wholly past the tile's m
 * / n are skipped (2×1, 1×2, 1×1); the rest of the padding is zeros.
 * Tile state: the driver calls thread_begin / thread_end around each
 * thread's kernel calls; this palette is C 16×64 B, A 16×32 B, B 8×64 B.
 * Cost (derived; no AMX host was available): a K = 32 TDP is half of a
 * full K = 64 one, and each block's 1024 sums take ~64 AVX-512 FMAs in
 * the write-back; both are the price of a scale per 32-block (ggml's AMX
 * int8 kernels use the same 16×16×32 shape).
 */
#include "gemm_int8_avx512.h"
#include "simd/common/amx.h"

enum { MR = 32, NR = 32, A_STRIDE = 32, B_STRIDE = NR * 4 };

static const _Alignas(64) fx_amx_tilecfg int8_palette = {
    .palette = 1,
    .colsb = {64, 64, 64, 64, 32, 32, 64, 64},
    .rows = {16, 16, 16, 16, 16, 16, 8, 8},
};

static void tiles_begin(void) { FX_TILE_CONFIG(&int8_palette); }
static void tiles_end(void) { FX_TILE_RELEASE(); }

/* The block's int32 dots d [32][32] (the computed row / column blocks). */
static inline __attribute__((always_inline)) void block_dots(const int two_m, const int two_n, const int8_t *a,
                                                             const int8_t *b, int32_t *d) {
    FX_TILES_2X2_ZERO(two_m, two_n);
    FX_TILES_2X2_DP(FX_TDPBSSD, two_m, two_n, a, a + 16 * A_STRIDE, A_STRIDE, b, b + 64, B_STRIDE);
    FX_TILES_2X2_STORE(two_m, two_n, d, NR);
}

static inline __attribute__((always_inline)) void tile_sums(const int two_m, const int two_n, int64_t nb,
                                                            const int8_t *a, const int8_t *b, const float *bs,
                                                            int rows, float *acc) {
    _Alignas(64) int32_t d[MR * NR];
    for (int64_t blk = 0; blk < nb; blk++, a += 32 * MR, b += 32 * NR, bs += NR) {
        block_dots(two_m, two_n, a, b, d);
        const __m512 s0 = _mm512_loadu_ps(bs), s1 = _mm512_loadu_ps(bs + 16);
        for (int i = 0; i < rows; i++) {
            float *r = acc + i * NR;
            _mm512_store_ps(r, _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(d + i * NR)), s0,
                                               _mm512_load_ps(r)));
            if (two_n)
                _mm512_store_ps(r + 16, _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(d + i * NR + 16)), s1,
                                                        _mm512_load_ps(r + 16)));
        }
    }
}

static void kernel_32x32(int64_t nb, const int8_t *a, const int8_t *b, const float *bs, const fx_int8_tile *t) {
    _Alignas(64) float acc[MR * NR] = {0};
    if (t->m > 16 && t->n > 16) tile_sums(1, 1, nb, a, b, bs, t->m, acc);
    else if (t->m > 16) tile_sums(1, 0, nb, a, b, bs, t->m, acc);
    else if (t->n > 16) tile_sums(0, 1, nb, a, b, bs, t->m, acc);
    else tile_sums(0, 0, nb, a, b, bs, t->m, acc);
    fx_int8_write_tile_avx512(acc, NR, t);
}

const fx_gemm_int8 fx_gemm_int8_amx = {"amx int8 tiles 32x32 (tdpbssd)", MR, NR, kernel_32x32, 1, tiles_begin,
                                       tiles_end};

/* Tiles from FX_INT8_AMX_MIN_M rows (below, most of a 16-row tile would be
 * padding; every kernel gives the same bits, so the threshold changes
 * speed only). */
const fx_gemm_int8 *fx_gemm_int8_amx_choose(const fx_cpu_facts *f, int64_t m) {
    return f->amx_int8 && m >= FX_INT8_AMX_MIN_M ? &fx_gemm_int8_amx : fx_gemm_int8_avx512(f, m);
}
