/*
 * attention_avx512.c — the attention task with AVX-512 f32 FMA micro-GEMMs
 * (also the FLUX_PRECISION=f32 table on AVX512_BF16 CPUs).
 *
 * A task has R rows (48 per block: three 16-lane vectors) and walks key
 * tiles of KT = 64 keys. Per tile:
 *   S  [KT][R] = K_tile · Qᵀ   rows of the task in the vector lanes:
 *                              8 keys × 48 rows = 24 zmm accumulators, K
 *                              broadcast, Qᵀ loaded (packed once per task)
 *   online softmax on S        column max / exp2 / sums stay vertical
 *                              (no horizontal reductions)
 *   O  [R][Dp] = α·O + P·V     6 rows × 64 dims = 24 zmm accumulators,
 *                              P broadcast, V loaded
 * K and V are packed once per call (attention.c: pack_kv), per kv head:
 *   K [nkt·KT][d]  V [nkt·KT][Dp]   (Dp = d rounded up to 16; zero rows
 *                                    past sk, zero columns past d)
 * so a tile is one contiguous block the hardware prefetchers follow.
 *
 * Per-task scratch (floats, every piece 64-byte aligned):
 *   qp [d][R] (Q·scale·log2 e, transposed)  s [KT][R]  o [R][Dp]
 *   m, l, alpha [R]
 */
#include "attention.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

enum { QT = 96, KT = 64, MK = 8, MR = 6, ROW_ALIGN = 48 };

typedef struct tile_bufs {
    float *qp, *s, *o, *m, *l, *alpha;
    const float *kp, *vp; /* the current tile in the packed K/V */
    int R, d, dp;
} tile_bufs;

static size_t up64(size_t bytes) { return (bytes + 63) & ~(size_t)63; }

/* Carve the scratch (base may be NULL to measure); returns bytes used. */
static size_t carve(const fx_attn_plan *p, void *base, tile_bufs *b) {
    const size_t R = (size_t)p->rows_pad, d = (size_t)p->a.d, dp = (d + 15) & ~(size_t)15;
    const size_t sizes[6] = {d * R, (size_t)KT * R, R * dp, R, R, R};
    float **dst[6] = {&b->qp, &b->s, &b->o, &b->m, &b->l, &b->alpha};
    size_t off = 0;
    for (int i = 0; i < 6; i++) {
        *dst[i] = base ? (float *)((char *)base + off) : NULL;
        off += up64(sizes[i] * sizeof(float));
    }
    b->R = (int)R;
    b->d = (int)d;
    b->dp = (int)dp;
    return off;
}

static size_t avx512_scratch_bytes(const fx_attn_plan *p) {
    tile_bufs b;
    return carve(p, NULL, &b);
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

/* qp[dd][r] = Q[row r][dd] · qscale; padding rows zero. Rows are first
 * copied (scaled) into o [R][Dp] — free until the first key tile — and
 * then transposed in 16×16 blocks. */
enum { PF_ROWS = 4 }; /* rows fetched ahead */
static void pack_q(const fx_attn_plan *p, const fx_attn_task *k, const tile_bufs *b) {
    const int R = b->R, d = b->d, dp = b->dp;
    const __m512 qs = _mm512_set1_ps(p->qscale);
    for (int r = 0; r < k->rows && r < PF_ROWS; r++) prefetch_row(fx_attn_q_row(p, k, r), 4 * d, 0);
    for (int r = 0; r < R; r++) {
        float *tr = b->o + (size_t)r * dp;
        if (r + PF_ROWS < k->rows) prefetch_row(fx_attn_q_row(p, k, r + PF_ROWS), 4 * d, 0);
        if (r < k->rows) {
            const float *q = fx_attn_q_row(p, k, r);
            for (int e = 0; e < dp; e += 16) {
                const __mmask16 mk = d - e >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (d - e)) - 1);
                _mm512_store_ps(tr + e, _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, q + e), qs));
            }
        } else {
            for (int e = 0; e < dp; e += 16) _mm512_store_ps(tr + e, _mm512_setzero_ps());
        }
    }
    for (int r0 = 0; r0 < R; r0 += 16)
        for (int e0 = 0; e0 < d; e0 += 16)
            transpose16((const uint32_t *)(b->o + (size_t)r0 * dp + e0), (size_t)dp,
                        (uint32_t *)(b->qp + (size_t)e0 * R + r0), (size_t)R,
                        d - e0 < 16 ? d - e0 : 16);
}

/* Bytes of one kv head's packed K and V. */
static size_t avx512_kv_head_bytes(const fx_attn_plan *p) {
    const size_t rows = (size_t)p->nkt * KT, d = (size_t)p->a.d, dp = (d + 15) & ~(size_t)15;
    return up64(rows * d * sizeof(float)) + up64(rows * dp * sizeof(float));
}

/* Key tiles [kb0, kb1) of kv head g → K rows (stride d: the score kernel
 * broadcasts single elements) and V rows (stride Dp: loaded as vectors). */
static void avx512_pack_kv(const fx_attn_plan *p, int g, int64_t kb0, int64_t kb1, void *dst) {
    const int d = p->a.d, dp = (d + 15) & ~15;
    float *kbase = dst;
    float *vbase = (float *)((char *)dst + up64((size_t)p->nkt * KT * d * sizeof(float)));
    for (int64_t kb = kb0; kb < kb1; kb++) {
        if (p->key_tiles[kb] == FX_ATTN_KEYS_NONE) continue; /* never read */
        for (int64_t j = kb * KT; j < (kb + 1) * KT; j++) {
            float *kd = kbase + (size_t)j * d, *vd = vbase + (size_t)j * dp;
            if (j >= p->a.sk) {
                memset(kd, 0, sizeof(float) * (size_t)d);
                memset(vd, 0, sizeof(float) * (size_t)dp);
                continue;
            }
            const float *kr = p->a.k + j * p->a.ldk + (int64_t)g * d;
            const float *vr = p->a.v + j * p->a.ldv + (int64_t)g * d;
            for (int e = 0; e < dp; e += 16) {
                const __mmask16 mk = d - e >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (d - e)) - 1);
                _mm512_mask_storeu_ps(kd + e, mk, _mm512_maskz_loadu_ps(mk, kr + e));
                _mm512_store_ps(vd + e, _mm512_maskz_loadu_ps(mk, vr + e));
            }
        }
    }
}

/* s[jj][r] = Σ_dd kp[jj][dd] · qp[dd][r] for all KT keys and R rows. */
static void scores(const tile_bufs *b) {
    const int R = b->R, d = b->d;
    for (int rb = 0; rb < R; rb += 48) {
        for (int jb = 0; jb < KT; jb += MK) {
            const float *kb = b->kp + (size_t)jb * d;
            const float *qb = b->qp + rb;
            __m512 c[MK][3];
#pragma GCC unroll 8
            for (int i = 0; i < MK; i++) c[i][0] = c[i][1] = c[i][2] = _mm512_setzero_ps();
            for (int dd = 0; dd < d; dd++) {
                const float *qd = qb + (size_t)dd * R;
                const __m512 q0 = _mm512_load_ps(qd), q1 = _mm512_load_ps(qd + 16),
                             q2 = _mm512_load_ps(qd + 32);
#pragma GCC unroll 8
                for (int i = 0; i < MK; i++) {
                    const __m512 kv = _mm512_set1_ps(kb[(size_t)i * d + dd]);
                    c[i][0] = _mm512_fmadd_ps(kv, q0, c[i][0]);
                    c[i][1] = _mm512_fmadd_ps(kv, q1, c[i][1]);
                    c[i][2] = _mm512_fmadd_ps(kv, q2, c[i][2]);
                }
            }
#pragma GCC unroll 8
            for (int i = 0; i < MK; i++) {
                float *sr = b->s + (size_t)(jb + i) * R + rb;
                _mm512_store_ps(sr, c[i][0]);
                _mm512_store_ps(sr + 16, c[i][1]);
                _mm512_store_ps(sr + 32, c[i][2]);
            }
        }
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
        for (int jj = 0; jj < KT; jj += 2) {
            float *s0 = b->s + (size_t)jj * R + rb, *s1 = s0 + R;
            const __m512 p0 = exp2_ps(_mm512_sub_ps(_mm512_load_ps(s0), use));
            const __m512 p1 = exp2_ps(_mm512_sub_ps(_mm512_load_ps(s1), use));
            _mm512_store_ps(s0, p0);
            _mm512_store_ps(s1, p1);
            sum0 = _mm512_add_ps(sum0, p0);
            sum1 = _mm512_add_ps(sum1, p1);
        }
        _mm512_store_ps(b->m + rb, mx);
        _mm512_store_ps(b->alpha + rb, alpha);
        _mm512_store_ps(b->l + rb, _mm512_fmadd_ps(_mm512_load_ps(b->l + rb), alpha,
                                                   _mm512_add_ps(sum0, sum1)));
    }
}

/* o[rb..rb+5][db..db+16·ND) = α·o + Σ_jj p[jj][r] · vp[jj][...] */
static inline __attribute__((always_inline)) void pv_block(const tile_bufs *b, int rb, int db,
                                                           int first, const int ND) {
    const int R = b->R, dp = b->dp;
    __m512 c[MR][4];
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++) {
        const float *orow = b->o + (size_t)(rb + i) * dp + db;
        const __m512 al = _mm512_set1_ps(b->alpha[rb + i]);
#pragma GCC unroll 4
        for (int v = 0; v < ND; v++)
            c[i][v] = first ? _mm512_setzero_ps() : _mm512_mul_ps(al, _mm512_load_ps(orow + 16 * v));
    }
    for (int jj = 0; jj < KT; jj++) {
        const float *vr = b->vp + (size_t)jj * dp + db;
        const float *pr = b->s + (size_t)jj * R + rb;
        __m512 vv[4];
#pragma GCC unroll 4
        for (int v = 0; v < ND; v++) vv[v] = _mm512_load_ps(vr + 16 * v);
#pragma GCC unroll 6
        for (int i = 0; i < MR; i++) {
            const __m512 pv = _mm512_set1_ps(pr[i]);
#pragma GCC unroll 4
            for (int v = 0; v < ND; v++) c[i][v] = _mm512_fmadd_ps(pv, vv[v], c[i][v]);
        }
    }
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++) {
        float *orow = b->o + (size_t)(rb + i) * dp + db;
#pragma GCC unroll 4
        for (int v = 0; v < ND; v++) _mm512_store_ps(orow + 16 * v, c[i][v]);
    }
}

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
            const __mmask16 mk = d - db >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (d - db)) - 1);
            const __m512 v = lr > 0.0f ? _mm512_mul_ps(_mm512_load_ps(orow + db), inv)
                                       : _mm512_setzero_ps();
            _mm512_mask_storeu_ps(out + db, mk, v);
        }
    }
}

static void avx512_run_task(const fx_attn_plan *p, int64_t t, void *scratch) {
    const fx_attn_task k = fx_attn_task_of(p, t);
    tile_bufs b;
    carve(p, scratch, &b);
    const float *kv = fx_attn_kv_head(p, k.g);
    const size_t vofs = up64((size_t)p->nkt * KT * b.d * sizeof(float)) / sizeof(float);
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
        b.kp = kv + (size_t)kb * KT * b.d;
        b.vp = kv + vofs + (size_t)kb * KT * b.dp;
        scores(&b);
        if (vis == FX_ATTN_PARTIAL) fx_attn_mask_tile(p, &k, kb, b.s, b.R);
        softmax_tile(&b);
        pv_tile(&b, first);
        first = 0;
    }
    store_output(p, &k, &b, !first);
}

const struct fx_attn_kernels fx_attn_avx512 = {
    .name = "avx512 f32 fma",
    .qt = QT,
    .row_align = ROW_ALIGN,
    .kt = KT,
    .scratch_bytes = avx512_scratch_bytes,
    .kv_head_bytes = avx512_kv_head_bytes,
    .pack_kv = avx512_pack_kv,
    .run_task = avx512_run_task,
};
