/*
 * attention_avx512_common.h — the attention task walk shared by the two
 * AVX-512 variants: attention_avx512.c (f32 FMA products) and
 * attention_avx512bf16.c (vdpbf16ps products). Everything here is f32 and
 * AVX-512F only, so it compiles under the flags of either file.
 *
 * A task has R rows (a multiple of 48: three 16-lane vectors; the rows of
 * the task lie in the vector lanes) and walks key tiles of KT = 64 keys.
 * Per visible tile (avx512_run_task):
 *   scores        S [KT][R] = K_tile · Qᵀ, 8 keys × 48 rows    (variant)
 *   mask          fx_attn_mask_tile on partly visible tiles
 *   softmax_tile  16 rows at a time: new max m, α = 2^(m_old − m),
 *                 p = 2^(s − m) by key pairs to store_probs  (variant),
 *                 l = α·l + Σp; max, exp2 and sums stay vertical (no
 *                 horizontal reductions)
 *   pv_tile       O [R][Dp] = α·O + P·V in pv_block calls of 6 rows ×
 *                 16..64 dims                                  (variant)
 * then out = O / l (store_output; rows that saw no key get zeros).
 *
 * The including file defines, before including this one, the type
 * tile_bufs with at least these f32 members:
 *   float *s, *o, *m, *l, *alpha;   s [KT][R], o [R][Dp], m, l, alpha [R]
 *   int R, d, dp;                   rows, head dim, Dp = d rounded up to 16
 * and, after it, the variant steps declared below. A variant that keeps
 * the output its own way (attention_amx.c: Oᵀ [Dp][R], same size) defines
 * FX_ATTN_VARIANT_OWNS_OUTPUT and provides pv_tile and store_output
 * instead of pv_block.
 */
#ifndef FX_ATTENTION_AVX512_COMMON_H
#define FX_ATTENTION_AVX512_COMMON_H

#include "simd/common/x86.h"
#include <math.h>

#include "attention.h"

/* QT rows per task (preferred), KT keys per tile, score tile MK keys × 48
 * rows, P·V tile MR rows, rows padded to ROW_ALIGN, PF_ROWS rows of Q / O
 * prefetched ahead. */
enum { QT = 96, KT = 64, MK = 8, MR = 6, ROW_ALIGN = 48, PF_ROWS = 4 };

/* ---- the variant's steps (defined by the including file) ---- */

/* The variant's own scratch pieces (Q packed, ...) from *off on, placed by
 * piece() (b->R, d, dp are set). */
static void carve_packed(tile_bufs *b, void *base, size_t *off);
/* Q of the task's rows, scaled by qscale, into the variant's qp layout. */
static void pack_q(const fx_attn_plan *p, const fx_attn_task *k, const tile_bufs *b);
/* Point b at key tile kb of the packed K/V of one kv head (kv). */
static void set_tile(tile_bufs *b, const fx_attn_plan *p, const void *kv, int64_t kb);
/* s[jj][r] = K_tile row jj · Q row r for all KT keys and R rows (with
 * store_scores). */
static void scores(const tile_bufs *b);
/* Keep the probabilities of keys 2jp, 2jp+1 of rows rb..rb+15 for P·V. */
static inline void store_probs(const tile_bufs *b, int jp, int rb, __m512 p0, __m512 p1);
#ifdef FX_ATTN_VARIANT_OWNS_OUTPUT
/* O = α·O (nothing when first) + P·V_tile over all rows. */
static void pv_tile(const tile_bufs *b, int first);
/* out[row] = O[row] / l[row] for the task's rows; zeros for rows that saw
 * no key (any == 0 or l == 0). */
static void store_output(const fx_attn_plan *p, const fx_attn_task *k, const tile_bufs *b, int any);
#else
/* o[rb..rb+MR)[db..db+16·ND) = α·o (or 0 when first) + P·V_tile (with
 * pv_start and pv_finish). */
static inline __attribute__((always_inline)) void pv_block(const tile_bufs *b, int rb, int db,
                                                           int first, const int ND);
#endif

/* ---- helpers ---- */

static inline size_t up64(size_t bytes) { return (bytes + 63) & ~(size_t)63; }

/* The next scratch piece of `bytes` at *off, 64-byte aligned (NULL when
 * base is NULL: only measuring). */
static inline void *piece(void *base, size_t *off, size_t bytes) {
    void *at = base ? (char *)base + *off : NULL;
    *off += up64(bytes);
    return at;
}

/* Mask of the first n lanes (n clamped to 0..16). */
static inline __mmask16 lanes(int n) {
    return n >= 16 ? (__mmask16)0xffff : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1);
}

/* 2^x for x <= 0 (−inf → 0): x = n + f, |f| <= 1/2, 2^f by a degree-6
 * minimax polynomial (relative error 1.6e-8), 2^n applied by scalef. */
static inline __m512 exp2_ps(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-200.0f));
    const __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 f = _mm512_sub_ps(x, n);
    __m512 y = _mm512_set1_ps(1.534581243e-04f);
    y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(1.339993207e-03f));
    y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(9.618489072e-03f));
    y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(5.550328642e-02f));
    y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(2.402264625e-01f));
    y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(6.931471825e-01f));
    y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(y, n);
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

/* Fetch the lines of a row ahead of use (rows are usually a page apart). */
static inline void prefetch_row(const void *row, int bytes, int for_write) {
    for (int e = 0; e < bytes; e += 64) {
        if (for_write) __builtin_prefetch((const char *)row + e, 1, 3);
        else __builtin_prefetch((const char *)row + e, 0, 3);
    }
}

/* ---- the shared steps ---- */

/* Scratch: the variant's pieces, then s [KT][R], o [R][Dp], m, l, alpha
 * [R] (base may be NULL to measure); returns bytes used. */
static size_t carve(const fx_attn_plan *p, void *base, tile_bufs *b) {
    const size_t R = (size_t)p->rows_pad, d = (size_t)p->a.d, dp = (d + 15) & ~(size_t)15;
    b->R = (int)R;
    b->d = (int)d;
    b->dp = (int)dp;
    size_t off = 0;
    carve_packed(b, base, &off);
    b->s = piece(base, &off, sizeof(float) * KT * R);
    b->o = piece(base, &off, sizeof(float) * R * dp);
    b->m = piece(base, &off, sizeof(float) * R);
    b->l = piece(base, &off, sizeof(float) * R);
    b->alpha = piece(base, &off, sizeof(float) * R);
    return off;
}

static size_t avx512_scratch_bytes(const fx_attn_plan *p) {
    tile_bufs b;
    return carve(p, NULL, &b);
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

/* Online softmax over the tile, 16 rows at a time: new max, α, p, l. */
static void softmax_tile(const tile_bufs *b) {
    const int R = b->R;
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    for (int rb = 0; rb < R; rb += 16) {
        const __m512 mold = _mm512_load_ps(b->m + rb);
        __m512 mx = mold;
        for (int jj = 0; jj < KT; jj++) mx = _mm512_max_ps(mx, _mm512_load_ps(b->s + (size_t)jj * R + rb));
        /* rows that have seen no key keep m = −inf and subtract 0 */
        const __m512 use = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(mx, ninf, _CMP_EQ_OQ), mx,
                                                _mm512_setzero_ps());
        const __m512 alpha = exp2_ps(_mm512_sub_ps(mold, use));
        __m512 sum0 = _mm512_setzero_ps(), sum1 = _mm512_setzero_ps();
        for (int jp = 0; jp < KT / 2; jp++) {
            const float *s0 = b->s + (size_t)(2 * jp) * R + rb, *s1 = s0 + R;
            const __m512 p0 = exp2_ps(_mm512_sub_ps(_mm512_load_ps(s0), use));
            const __m512 p1 = exp2_ps(_mm512_sub_ps(_mm512_load_ps(s1), use));
            store_probs(b, jp, rb, p0, p1);
            sum0 = _mm512_add_ps(sum0, p0);
            sum1 = _mm512_add_ps(sum1, p1);
        }
        _mm512_store_ps(b->m + rb, mx);
        _mm512_store_ps(b->alpha + rb, alpha);
        _mm512_store_ps(b->l + rb, _mm512_fmadd_ps(_mm512_load_ps(b->l + rb), alpha,
                                                   _mm512_add_ps(sum0, sum1)));
    }
}

#ifndef FX_ATTN_VARIANT_OWNS_OUTPUT
/* The P·V accumulators of rows rb..rb+MR, dims db..db+16·ND: α·o, or 0
 * on the first tile (o holds nothing yet). */
static inline __attribute__((always_inline)) void pv_start(const tile_bufs *b, int rb, int db,
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
static inline __attribute__((always_inline)) void pv_finish(const tile_bufs *b, int rb, int db,
                                                            const int ND, __m512 c[MR][4]) {
    const int dp = b->dp;
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++) {
        float *orow = b->o + (size_t)(rb + i) * dp + db;
#pragma GCC unroll 4
        for (int v = 0; v < ND; v++) _mm512_store_ps(orow + 16 * v, c[i][v]);
    }
}

/* O = α·O + P·V over all rows: 64 dims per pv_block, then the 16..48 left. */
static void pv_tile(const tile_bufs *b, int first) {
    for (int rb = 0; rb < b->R; rb += MR) {
        int db = 0;
        for (; db + 64 <= b->dp; db += 64) pv_block(b, rb, db, first, 4);
        switch ((b->dp - db) / 16) {
        case 3: pv_block(b, rb, db, first, 3); break;
        case 2: pv_block(b, rb, db, first, 2); break;
        case 1: pv_block(b, rb, db, first, 1); break;
        default: break;
        }
    }
}

/* out[row] = o[row] / l[row]; rows that saw no key get zeros. */
static void store_output(const fx_attn_plan *p, const fx_attn_task *k, const tile_bufs *b,
                         int any) {
    const int d = b->d;
    for (int r = 0; r < k->rows; r++) {
        float *out = fx_attn_o_row(p, k, r);
        if (r + PF_ROWS < k->rows) prefetch_row(fx_attn_o_row(p, k, r + PF_ROWS), 4 * d, 1);
        const float lr = any ? b->l[r] : 0.0f;
        const __m512 inv = _mm512_set1_ps(lr > 0.0f ? 1.0f / lr : 0.0f);
        const float *orow = b->o + (size_t)r * b->dp;
        for (int db = 0; db < d; db += 16) {
            const __m512 v = lr > 0.0f ? _mm512_mul_ps(_mm512_load_ps(orow + db), inv)
                                       : _mm512_setzero_ps();
            _mm512_mask_storeu_ps(out + db, lanes(d - db), v);
        }
    }
}

#endif

/* One task: its rows against every key tile it can see, in order. */
static void avx512_run_task(const fx_attn_plan *p, int64_t t, void *scratch) {
    const fx_attn_task k = fx_attn_task_of(p, t);
    tile_bufs b;
    carve(p, scratch, &b);
    const void *kv = fx_attn_kv_head(p, k.g);
    pack_q(p, &k, &b);
    for (int r = 0; r < b.R; r += 16) {
        _mm512_store_ps(b.m + r, _mm512_set1_ps(-INFINITY));
        _mm512_store_ps(b.l + r, _mm512_setzero_ps());
    }
    int first = 1;
    for (int64_t kb = 0; kb < p->nkt; kb++) {
        const fx_attn_vis vis = fx_attn_tile_vis(p, &k, kb);
        if (vis == FX_ATTN_DONE) break;
        if (vis == FX_ATTN_SKIP) continue;
        set_tile(&b, p, kv, kb);
        scores(&b);
        if (vis == FX_ATTN_PARTIAL) fx_attn_mask_tile(p, &k, kb, b.s, b.R);
        softmax_tile(&b);
        pv_tile(&b, first);
        first = 0;
    }
    store_output(p, &k, &b, !first);
}

#endif
