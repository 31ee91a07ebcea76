/*
 * attention_avx512_common.h — what the AVX-512 attention hooks share
 * (attention_avx512.c: f32 FMA products, attention_avx512bf16.c:
 * vdpbf16ps, attention_amx.c: tiles): the geometry, lane masks, a 16×16
 * transpose, and for the two register-tiled variants the store of the
 * score accumulators and the α·O start / write-back of a P·V block. All
 * AVX-512F, so it compiles under the flags of each file. Each file then
 * includes attention_simd.h (the online softmax over vec_avx512.h), after
 * defining STORE_PROBS if it keeps P its own way.
 *
 * A task has R rows (a multiple of 48: three 16-lane vectors; the rows of
 * the task lie in the vector lanes) and walks key tiles of KT = 64 keys.
 * The register-tiled variants compute
 *   scores   S [KT][R] = K_tile · Qᵀ, 8 keys × 48 rows (store_scores)
 *   pv_tile  O [R][Dp] = α·O + P·V in pv_block calls of 6 rows × 16..64
 *            dims (FX_ATTN_AVX512_PV_TILE over the file's pv_block,
 *            which starts with pv_start and ends with pv_finish)
 */
#ifndef FX_ATTENTION_AVX512_COMMON_H
#define FX_ATTENTION_AVX512_COMMON_H

#include "attention.h"
#include "simd/common/vec_avx512.h"
#include "simd/common/vec_exp2.h"

/* QT rows per task (preferred), KT keys per tile, score tile MK keys × 48
 * rows, P·V tile MR rows, rows padded to ROW_ALIGN. */
enum { QT = 96, KT = 64, MK = 8, MR = 6, ROW_ALIGN = 48 };

static inline size_t up64(size_t bytes) { return (bytes + 63) & ~(size_t)63; }

/* Mask of the first n lanes (n clamped to 0..16). */
static inline __mmask16 lanes(int n) {
    return n >= 16 ? (__mmask16)0xffff : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1);
}

/* In-register transpose of a 16×16 block of 32-bit elements: row x of
 * src (src + x·lds) becomes column x of dst (dst + y·ldd, y < ny). */
static inline void transpose16(const uint32_t *src, size_t lds, uint32_t *dst, size_t ldd,
                               int ny) {
    __m512i r[16], t[16];
    for (int x = 0; x < 16; x++) r[x] = _mm512_loadu_si512(src + x * lds);
    for (int x = 0; x < 16; x += 2) { /* (row pairs) per 128-bit lane */
        t[x] = _mm512_unpacklo_epi32(r[x], r[x + 1]);
        t[x + 1] = _mm512_unpackhi_epi32(r[x], r[x + 1]);
    }
    for (int x = 0; x < 16; x += 4) { /* r[x + c] lane L = column 4L + c of rows x..x+3 */
        r[x] = _mm512_unpacklo_epi64(t[x], t[x + 2]);
        r[x + 1] = _mm512_unpackhi_epi64(t[x], t[x + 2]);
        r[x + 2] = _mm512_unpacklo_epi64(t[x + 1], t[x + 3]);
        r[x + 3] = _mm512_unpackhi_epi64(t[x + 1], t[x + 3]);
    }
    for (int c = 0; c < 4; c++) { /* gather lane L of the four row groups */
        const __m512i v0 = _mm512_shuffle_i32x4(r[c], r[4 + c], 0x88);
        const __m512i v1 = _mm512_shuffle_i32x4(r[c], r[4 + c], 0xdd);
        const __m512i v2 = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0x88);
        const __m512i v3 = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0xdd);
        t[c] = _mm512_shuffle_i32x4(v0, v2, 0x88);
        t[8 + c] = _mm512_shuffle_i32x4(v0, v2, 0xdd);
        t[4 + c] = _mm512_shuffle_i32x4(v1, v3, 0x88);
        t[12 + c] = _mm512_shuffle_i32x4(v1, v3, 0xdd);
    }
    for (int y = 0; y < ny; y++) _mm512_store_si512(dst + y * ldd, t[y]);
}

/* s [KT][R]: rows jb..jb+MK, lanes rb..rb+47 = the score accumulators c. */
static inline __attribute__((always_inline)) void store_scores(float *s, int R, int jb, int rb,
                                                               __m512 c[MK][3]) {
#pragma GCC unroll 8
    for (int i = 0; i < MK; i++) {
        float *sr = s + (size_t)(jb + i) * R + rb;
        _mm512_store_ps(sr, c[i][0]);
        _mm512_store_ps(sr + 16, c[i][1]);
        _mm512_store_ps(sr + 32, c[i][2]);
    }
}

/* The P·V accumulators of rows rb..rb+MR, dims db..db+16·ND: α·o, or 0
 * on the first tile (o holds nothing yet). */
static inline __attribute__((always_inline)) void pv_start(const fx_attn_bufs *b, int rb, int db,
                                                           int first, const int ND,
                                                           __m512 c[MR][4]) {
    const int dp = b->dp;
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++) {
        const float *orow = b->o + (size_t)(rb + i) * dp + db;
        const __m512 al = _mm512_set1_ps(b->alpha[rb + i]);
#pragma GCC unroll 4
        for (int v = 0; v < ND; v++)
            c[i][v] = first ? _mm512_setzero_ps() : _mm512_mul_ps(al, _mm512_load_ps(orow + 16 * v));
    }
}

/* ... and back into o. */
static inline __attribute__((always_inline)) void pv_finish(const fx_attn_bufs *b, int rb, int db,
                                                            const int ND, __m512 c[MR][4]) {
    const int dp = b->dp;
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++) {
        float *orow = b->o + (size_t)(rb + i) * dp + db;
#pragma GCC unroll 4
        for (int v = 0; v < ND; v++) _mm512_store_ps(orow + 16 * v, c[i][v]);
    }
}

/* O = α·O + P·V over all rows: 64 dims per pv_block, then the 16..48 left;
 * pv_block(b, rb, db, first, ND) is the including file's. */
#define FX_ATTN_AVX512_PV_TILE(name)                                                       \
    static void name(const fx_attn_bufs *b, int first) {                                  \
        for (int rb = 0; rb < b->R; rb += MR) {                                            \
            int db = 0;                                                                    \
            for (; db + 64 <= b->dp; db += 64) pv_block(b, rb, db, first, 4);              \
            switch ((b->dp - db) / 16) {                                                   \
            case 3: pv_block(b, rb, db, first, 3); break;                                  \
            case 2: pv_block(b, rb, db, first, 2); break;                                  \
            case 1: pv_block(b, rb, db, first, 1); break;                                  \
            default: break;                                                                \
            }                                                                              \
        }                                                                                  \
    }

#endif
