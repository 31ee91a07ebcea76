/*
 * gemm_int8_amx.c — the AMX-INT8 kernel of the int8 GEMM (gemm_int8.c):
 * 32 channels × 32 tokens in 2×2 tiles of TDPBSSD over the whole K; and
 * the int8 choice of the amx table.
 *
 *   C (tmm0..3, 16×16 int32 each: channels × tokens) = 0, then per 64 k:
 *     A (tmm4, 5): 16 weight rows × 64 codes each, read in place from the
 *       form (row stride ldq; rows and k are padded there, so every tile
 *       is whole)
 *     B (tmm6, 7): 16 k-quads × 16 tokens × 4 codes of the X panel
 *       [ldq/4][32][4] (stride 128 bytes, the second 16 tokens at +64):
 *       the packing already is the B tile's layout
 *     4 TDPBSSD (s8·s8: no offset, no correction)
 *   the four int32 tiles are stored to L1 once, at the end, and the
 *   AVX-512 epilogue (gemm_int8_avx512.h) scales them.
 * Channel / token halves wholly past the tile's n / m are skipped (2×1,
 * 1×2, 1×1). Tile state: the driver calls thread_begin / thread_end around
 * each thread's kernel calls; this palette is 16 rows × 64 bytes for all
 * eight tiles. Speed: not timed here (no AMX host); a micro-experiment of
 * this scheme on a Sapphire Rapids-class host ran 3431 G-ops/s on
 * 768×9216×3072 with 2 threads, 1.8-2.0× its bf16 tiles.
 */
#include "gemm_int8_avx512.h"
#include "simd/common/amx.h"

enum { MR = 32, NR = 32, X_STRIDE = NR * 4 };

static const _Alignas(64) fx_amx_tilecfg int8_palette = {
    .palette = 1,
    .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
    .rows = {16, 16, 16, 16, 16, 16, 16, 16},
};

static void tiles_begin(void) { FX_TILE_CONFIG(&int8_palette); }
static void tiles_end(void) { FX_TILE_RELEASE(); }

static inline __attribute__((always_inline)) void tile_dots(const int two_m, const int two_n, int64_t kq,
                                                            const int8_t *w, int64_t ldw, const uint8_t *x,
                                                            int32_t *d) {
    FX_TILES_2X2_ZERO(two_m, two_n);
    for (int64_t q = 0; q < kq; q += 16)
        FX_TILES_2X2_DP(FX_TDPBSSD, two_m, two_n, w + 4 * q, w + 16 * ldw + 4 * q, ldw, x + q * X_STRIDE,
                        x + q * X_STRIDE + 64, X_STRIDE);
    FX_TILES_2X2_STORE(two_m, two_n, d, NR);
}

static void kernel_32x32(int64_t kq, const int8_t *w, int64_t ldw, const uint8_t *x, const fx_int8_tile *t) {
    _Alignas(64) int32_t d[MR * NR];
    /* here "m" is the tile's channel side (A rows), "n" its token side */
    if (t->n > 16 && t->m > 16) tile_dots(1, 1, kq, w, ldw, x, d);
    else if (t->n > 16) tile_dots(1, 0, kq, w, ldw, x, d);
    else if (t->m > 16) tile_dots(0, 1, kq, w, ldw, x, d);
    else tile_dots(0, 0, kq, w, ldw, x, d);
    fx_int8_finish_avx512(d, t->n > 16 ? MR : 16, NR, 0, t);
}

const fx_gemm_int8 fx_gemm_int8_amx = {"amx int8 tiles 32x32 (tdpbssd)", MR, NR, kernel_32x32, 0, tiles_begin,
                                       tiles_end};

/* Tiles from FX_INT8_AMX_MIN_M rows (below, most of a 16-token tile would
 * be padding; every kernel gives the same bits, so the threshold changes
 * speed only). */
const fx_gemm_int8 *fx_gemm_int8_amx_choose(const fx_cpu_facts *f, int64_t m) {
    return f->amx_int8 && m >= FX_INT8_AMX_MIN_M ? &fx_gemm_int8_amx : fx_gemm_int8_avx512(f, m);
}
