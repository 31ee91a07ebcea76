/*
 * attention_avx2.c — the attention task with AVX2 f32 FMA micro-GEMMs
 * (16 ymm registers, 8 lanes).
 *
 * Same tile walk as attention_avx512.c: a task's R rows (blocks of 24:
 * three 8-lane vectors) are the vector lanes of the score tile, key tiles
 * of KT = 64 keys. Per tile:
 *   S  [KT][R] = K_tile · Qᵀ   4 keys × 24 rows = 12 ymm accumulators
 *                              (+ 3 Q vectors + 1 broadcast = 16)
 *   online softmax on S        column max / exp2 / sums, all vertical
 *   O  [R][Dp] = α·O + P·V     6 rows × 16 dims = 12 ymm accumulators
 *                              (+ 2 V vectors + 1 broadcast)
 * K and V are packed once per call (attention.c: pack_kv), per kv head:
 *   K [nkt·KT][d]  V [nkt·KT][Dp]   (Dp = d rounded up to 16; zero rows
 *                                    past sk, zero columns past d)
 *
 * Per-task scratch (floats, every piece 64-byte aligned):
 *   qp [d][R] (Q·scale·log2 e, transposed)  s [KT][R]  o [R][Dp]
 *   m, l, alpha [R]
 */
#include "attention.h"

#include "simd/common/x86.h"
#include <math.h>
#include <string.h>

enum { QT = 96, KT = 64, MK = 4, MR = 6, ROW_ALIGN = 24, PF_ROWS = 4 };

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

static size_t avx2_scratch_bytes(const fx_attn_plan *p) {
    tile_bufs b;
    return carve(p, NULL, &b);
}

/* Lane mask of the first n of 8 lanes (n clamped to 0..8), for maskload. */
static inline __m256i lanes8(int n) {
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), idx);
}

/* 2^x for x <= 0 (−inf → 0): x = n + f, |f| <= 1/2, 2^f by a degree-6
 * minimax polynomial (relative error 1.6e-8); 2^n built in the exponent
 * field, with x clamped at −127 where 2^n becomes +0. */
static inline __m256 exp2_ps(__m256 x) {
    x = _mm256_max_ps(x, _mm256_set1_ps(-127.0f));
    const __m256 n = _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256 f = _mm256_sub_ps(x, n);
    __m256 y = _mm256_set1_ps(1.534581243e-04f);
    y = _mm256_fmadd_ps(y, f, _mm256_set1_ps(1.339993207e-03f));
    y = _mm256_fmadd_ps(y, f, _mm256_set1_ps(9.618489072e-03f));
    y = _mm256_fmadd_ps(y, f, _mm256_set1_ps(5.550328642e-02f));
    y = _mm256_fmadd_ps(y, f, _mm256_set1_ps(2.402264625e-01f));
    y = _mm256_fmadd_ps(y, f, _mm256_set1_ps(6.931471825e-01f));
    y = _mm256_fmadd_ps(y, f, _mm256_set1_ps(1.0f));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
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
 * then transposed from there (L1/L2-resident). */
static void pack_q(const fx_attn_plan *p, const fx_attn_task *k, const tile_bufs *b) {
    const int R = b->R, d = b->d, dp = b->dp;
    const __m256 qs = _mm256_set1_ps(p->qscale);
    for (int r = 0; r < k->rows && r < PF_ROWS; r++) prefetch_row(fx_attn_q_row(p, k, r), 4 * d, 0);
    for (int r = 0; r < k->rows; r++) {
        float *tr = b->o + (size_t)r * dp;
        if (r + PF_ROWS < k->rows) prefetch_row(fx_attn_q_row(p, k, r + PF_ROWS), 4 * d, 0);
        const float *q = fx_attn_q_row(p, k, r);
        for (int e = 0; e < d; e += 8)
            _mm256_store_ps(tr + e, _mm256_mul_ps(_mm256_maskload_ps(q + e, lanes8(d - e)), qs));
    }
    for (int dd = 0; dd < d; dd++) {
        float *qd = b->qp + (size_t)dd * R;
        for (int r = 0; r < k->rows; r++) qd[r] = b->o[(size_t)r * dp + dd];
        for (int r = k->rows; r < R; r++) qd[r] = 0.0f;
    }
}

/* Bytes of one kv head's packed K and V. */
static size_t avx2_kv_head_bytes(const fx_attn_plan *p) {
    const size_t rows = (size_t)p->nkt * KT, d = (size_t)p->a.d, dp = (d + 15) & ~(size_t)15;
    return up64(rows * d * sizeof(float)) + up64(rows * dp * sizeof(float));
}

/* Key tiles [kb0, kb1) of kv head g → K rows (stride d) and V rows
 * (stride Dp, zero-padded). */
static void avx2_pack_kv(const fx_attn_plan *p, int g, int64_t kb0, int64_t kb1, void *dst) {
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
            memcpy(kd, kr, sizeof(float) * (size_t)d);
            for (int e = 0; e < dp; e += 8)
                _mm256_store_ps(vd + e, _mm256_maskload_ps(vr + e, lanes8(d - e)));
        }
    }
}

/* s[jj][r] = Σ_dd kp[jj][dd] · qp[dd][r] for all KT keys and R rows. */
static void scores(const tile_bufs *b) {
    const int R = b->R, d = b->d;
    for (int rb = 0; rb < R; rb += 24) {
        for (int jb = 0; jb < KT; jb += MK) {
            const float *kb = b->kp + (size_t)jb * d;
            const float *qb = b->qp + rb;
            __m256 c[MK][3];
#pragma GCC unroll 4
            for (int i = 0; i < MK; i++) c[i][0] = c[i][1] = c[i][2] = _mm256_setzero_ps();
            for (int dd = 0; dd < d; dd++) {
                const float *qd = qb + (size_t)dd * R;
                const __m256 q0 = _mm256_load_ps(qd), q1 = _mm256_load_ps(qd + 8),
                             q2 = _mm256_load_ps(qd + 16);
#pragma GCC unroll 4
                for (int i = 0; i < MK; i++) {
                    const __m256 kv = _mm256_broadcast_ss(kb + (size_t)i * d + dd);
                    c[i][0] = _mm256_fmadd_ps(kv, q0, c[i][0]);
                    c[i][1] = _mm256_fmadd_ps(kv, q1, c[i][1]);
                    c[i][2] = _mm256_fmadd_ps(kv, q2, c[i][2]);
                }
            }
#pragma GCC unroll 4
            for (int i = 0; i < MK; i++) {
                float *sr = b->s + (size_t)(jb + i) * R + rb;
                _mm256_store_ps(sr, c[i][0]);
                _mm256_store_ps(sr + 8, c[i][1]);
                _mm256_store_ps(sr + 16, c[i][2]);
            }
        }
    }
}

/* Online softmax over the tile, 8 rows at a time: new max, α, p, l. */
static void softmax_tile(const tile_bufs *b) {
    const int R = b->R;
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    for (int rb = 0; rb < R; rb += 8) {
        const __m256 mold = _mm256_load_ps(b->m + rb);
        __m256 mx = mold;
        for (int jj = 0; jj < KT; jj++) mx = _mm256_max_ps(mx, _mm256_load_ps(b->s + (size_t)jj * R + rb));
        /* rows that have seen no key keep m = −inf and subtract 0 */
        const __m256 use = _mm256_andnot_ps(_mm256_cmp_ps(mx, ninf, _CMP_EQ_OQ), mx);
        const __m256 alpha = exp2_ps(_mm256_sub_ps(mold, use));
        __m256 sum0 = _mm256_setzero_ps(), sum1 = _mm256_setzero_ps();
        for (int jj = 0; jj < KT; jj += 2) {
            float *s0 = b->s + (size_t)jj * R + rb, *s1 = s0 + R;
            const __m256 p0 = exp2_ps(_mm256_sub_ps(_mm256_load_ps(s0), use));
            const __m256 p1 = exp2_ps(_mm256_sub_ps(_mm256_load_ps(s1), use));
            _mm256_store_ps(s0, p0);
            _mm256_store_ps(s1, p1);
            sum0 = _mm256_add_ps(sum0, p0);
            sum1 = _mm256_add_ps(sum1, p1);
        }
        _mm256_store_ps(b->m + rb, mx);
        _mm256_store_ps(b->alpha + rb, alpha);
        _mm256_store_ps(b->l + rb, _mm256_fmadd_ps(_mm256_load_ps(b->l + rb), alpha,
                                                   _mm256_add_ps(sum0, sum1)));
    }
}

/* o[rb..rb+5][db..db+16) = α·o + Σ_jj p[jj][r] · vp[jj][db..db+16) */
static inline void pv_block(const tile_bufs *b, int rb, int db, int first) {
    const int R = b->R, dp = b->dp;
    __m256 c[MR][2];
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++) {
        const float *orow = b->o + (size_t)(rb + i) * dp + db;
        if (first) {
            c[i][0] = c[i][1] = _mm256_setzero_ps();
        } else {
            const __m256 al = _mm256_broadcast_ss(b->alpha + rb + i);
            c[i][0] = _mm256_mul_ps(al, _mm256_load_ps(orow));
            c[i][1] = _mm256_mul_ps(al, _mm256_load_ps(orow + 8));
        }
    }
    for (int jj = 0; jj < KT; jj++) {
        const float *vr = b->vp + (size_t)jj * dp + db;
        const float *pr = b->s + (size_t)jj * R + rb;
        const __m256 v0 = _mm256_load_ps(vr), v1 = _mm256_load_ps(vr + 8);
#pragma GCC unroll 6
        for (int i = 0; i < MR; i++) {
            const __m256 pv = _mm256_broadcast_ss(pr + i);
            c[i][0] = _mm256_fmadd_ps(pv, v0, c[i][0]);
            c[i][1] = _mm256_fmadd_ps(pv, v1, c[i][1]);
        }
    }
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++) {
        float *orow = b->o + (size_t)(rb + i) * dp + db;
        _mm256_store_ps(orow, c[i][0]);
        _mm256_store_ps(orow + 8, c[i][1]);
    }
}

static void pv_tile(const tile_bufs *b, int first) {
    for (int rb = 0; rb < b->R; rb += MR)
        for (int db = 0; db < b->dp; db += 16) pv_block(b, rb, db, first);
}

/* out[row] = o[row] / l[row]; rows that saw no key get zeros. */
static void store_output(const fx_attn_plan *p, const fx_attn_task *k, const tile_bufs *b,
                         int any) {
    const int d = b->d;
    for (int r = 0; r < k->rows; r++) {
        float *out = fx_attn_o_row(p, k, r);
        if (r + PF_ROWS < k->rows) prefetch_row(fx_attn_o_row(p, k, r + PF_ROWS), 4 * d, 1);
        const float lr = any ? b->l[r] : 0.0f;
        const __m256 inv = _mm256_set1_ps(lr > 0.0f ? 1.0f / lr : 0.0f);
        const float *orow = b->o + (size_t)r * b->dp;
        for (int db = 0; db < d; db += 8) {
            const __m256 v = lr > 0.0f ? _mm256_mul_ps(_mm256_load_ps(orow + db), inv)
                                       : _mm256_setzero_ps();
            if (d - db >= 8) _mm256_storeu_ps(out + db, v);
            else _mm256_maskstore_ps(out + db, lanes8(d - db), v);
        }
    }
}

static void avx2_run_task(const fx_attn_plan *p, int64_t t, void *scratch) {
    const fx_attn_task k = fx_attn_task_of(p, t);
    tile_bufs b;
    carve(p, scratch, &b);
    const float *kv = fx_attn_kv_head(p, k.g);
    const size_t vofs = up64((size_t)p->nkt * KT * b.d * sizeof(float)) / sizeof(float);
    pack_q(p, &k, &b);
    for (int r = 0; r < b.R; r += 8) {
        _mm256_store_ps(b.m + r, _mm256_set1_ps(-INFINITY));
        _mm256_store_ps(b.l + r, _mm256_setzero_ps());
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

const struct fx_attn_kernels fx_attn_avx2 = {
    .name = "avx2 f32 fma",
    .qt = QT,
    .row_align = ROW_ALIGN,
    .kt = KT,
    .scratch_bytes = avx2_scratch_bytes,
    .kv_head_bytes = avx2_kv_head_bytes,
    .pack_kv = avx2_pack_kv,
    .run_task = avx2_run_task,
};
