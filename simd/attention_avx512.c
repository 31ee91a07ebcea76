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
 * K and V tiles are copied into contiguous scratch first: rows of the
 * activations are usually 4 KiB-multiples apart and would all fall into
 * the same L1 sets.
 *
 * Scratch (floats, every piece 64-byte aligned), Dp = d rounded up to 16:
 *   qp [d][R] (Q·scale·log2 e, transposed)  kp [KT][d]  vp [KT][Dp]
 *   s [KT][R]  o [R][Dp]  m, l, alpha [R]
 */
#include "attention.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

enum { QT = 96, KT = 64, MK = 8, MR = 6, ROW_ALIGN = 48 };

typedef struct tile_bufs {
    float *qp, *kp, *vp, *s, *o, *m, *l, *alpha;
    int R, d, dp;
} tile_bufs;

static size_t up64(size_t bytes) { return (bytes + 63) & ~(size_t)63; }

/* Carve the scratch (base may be NULL to measure); returns bytes used. */
static size_t carve(const fx_attn_plan *p, void *base, tile_bufs *b) {
    const size_t R = (size_t)p->rows_pad, d = (size_t)p->a.d, dp = (d + 15) & ~(size_t)15;
    const size_t sizes[8] = {d * R, (size_t)KT * d, (size_t)KT * dp, (size_t)KT * R, R * dp, R, R, R};
    float **dst[8] = {&b->qp, &b->kp, &b->vp, &b->s, &b->o, &b->m, &b->l, &b->alpha};
    size_t off = 0;
    for (int i = 0; i < 8; i++) {
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

/* qp[dd][r] = Q[row r][dd] · qscale; rows past the task's rows are zero. */
static void pack_q(const fx_attn_plan *p, const fx_attn_task *k, const tile_bufs *b) {
    const int R = b->R, d = b->d;
    const float qs = p->qscale;
    for (int r = 0; r < R; r++) {
        if (r < k->rows) {
            const float *q = fx_attn_q_row(p, k, r);
            for (int dd = 0; dd < d; dd++) b->qp[(size_t)dd * R + r] = q[dd] * qs;
        } else {
            for (int dd = 0; dd < d; dd++) b->qp[(size_t)dd * R + r] = 0.0f;
        }
    }
}

/* dst[0..n) = src[0..n), zero-filled up to n_pad (a multiple of 16). */
static inline void copy_row(float *dst, const float *src, int n, int n_pad) {
    int e = 0;
    for (; e + 16 <= n; e += 16) _mm512_store_ps(dst + e, _mm512_loadu_ps(src + e));
    for (; e < n_pad; e += 16) {
        const __mmask16 mk = n - e >= 16 ? (__mmask16)0xffff
                             : n > e   ? (__mmask16)((1u << (n - e)) - 1)
                                       : (__mmask16)0;
        _mm512_storeu_ps(dst + e, _mm512_maskz_loadu_ps(mk, src + e));
    }
}

/* Copy keys [j0, j0 + nj) of kv head g; rows nj..KT−1 are zero. The rows
 * of K are packed with stride d (the score kernel broadcasts single
 * elements), those of V with stride Dp (loaded as whole vectors). */
static void pack_kv(const fx_attn_plan *p, int g, int64_t j0, int nj, const tile_bufs *b) {
    const int d = b->d, dp = b->dp;
    const float *ksrc = p->a.k + j0 * p->a.ldk + (int64_t)g * d;
    const float *vsrc = p->a.v + j0 * p->a.ldv + (int64_t)g * d;
    for (int jj = 0; jj < nj; jj++) {
        const float *kr = ksrc + jj * p->a.ldk;
        float *kd = b->kp + (size_t)jj * d;
        int e = 0;
        for (; e + 16 <= d; e += 16) _mm512_storeu_ps(kd + e, _mm512_loadu_ps(kr + e));
        if (e < d) {
            const __mmask16 mk = (__mmask16)((1u << (d - e)) - 1);
            _mm512_mask_storeu_ps(kd + e, mk, _mm512_maskz_loadu_ps(mk, kr + e));
        }
        copy_row(b->vp + (size_t)jj * dp, vsrc + jj * p->a.ldv, d, dp);
    }
    if (nj < KT) {
        memset(b->kp + (size_t)nj * d, 0, sizeof(float) * (size_t)(KT - nj) * d);
        memset(b->vp + (size_t)nj * dp, 0, sizeof(float) * (size_t)(KT - nj) * dp);
    }
}

/* The cache lines of the next key tile's K and V rows. Those rows are
 * usually a multiple of 4 KiB apart, so the hardware prefetchers cannot
 * follow them; the score kernel fetches a few lines per iteration so that
 * they are in cache when pack_kv copies them. */
typedef struct pf_stream {
    const char *row[2];
    int64_t stride[2];
    int rows[2];
    int part, off, row_bytes, every, countdown;
} pf_stream;

static void pf_init(pf_stream *s, const fx_attn_plan *p, int g, int64_t j0, int iterations) {
    memset(s, 0, sizeof *s);
    const int64_t left = p->a.sk - j0;
    const int nn = left <= 0 ? 0 : left < KT ? (int)left : KT;
    s->row[0] = (const char *)(p->a.k + j0 * p->a.ldk + (int64_t)g * p->a.d);
    s->row[1] = (const char *)(p->a.v + j0 * p->a.ldv + (int64_t)g * p->a.d);
    s->stride[0] = p->a.ldk * (int64_t)sizeof(float);
    s->stride[1] = p->a.ldv * (int64_t)sizeof(float);
    s->rows[0] = s->rows[1] = nn;
    s->row_bytes = p->a.d * (int)sizeof(float);
    const int lines = 2 * nn * ((s->row_bytes + 63) / 64);
    s->every = lines ? (iterations / lines > 0 ? iterations / lines : 1) : 0;
    s->countdown = s->every;
    s->part = nn ? 0 : 2;
}

static inline void pf_step(pf_stream *s) {
    if (s->part > 1 || --s->countdown) return;
    s->countdown = s->every;
    _mm_prefetch(s->row[s->part] + s->off, _MM_HINT_T0);
    s->off += 64;
    if (s->off >= s->row_bytes) {
        s->off = 0;
        s->row[s->part] += s->stride[s->part];
        if (--s->rows[s->part] == 0) s->part++;
    }
}

/* s[jj][r] = Σ_dd kp[jj][dd] · qp[dd][r] for all KT keys and R rows. */
static void scores(const tile_bufs *b, pf_stream *pf) {
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
                pf_step(pf);
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
        const int64_t j0 = kb * KT;
        const int nj = p->a.sk - j0 < KT ? (int)(p->a.sk - j0) : KT;
        pack_kv(p, k.g, j0, nj, &b);
        pf_stream pf;
        pf_init(&pf, p, k.g, j0 + KT, (b.R / 48) * (KT / MK) * b.d);
        scores(&b, &pf);
        if (vis == FX_ATTN_PARTIAL) fx_attn_mask_tile(p, &k, kb, b.s, b.R);
        softmax_tile(&b);
        pv_tile(&b, first);
        first = 0;
    }
    store_output(p, &k, &b, !first);
}

const struct fx_attn_kernels fx_attn_avx512 = {
    .name = "avx512 f32 48x64",
    .qt = QT,
    .row_align = ROW_ALIGN,
    .kt = KT,
    .scratch_bytes = avx512_scratch_bytes,
    .run_task = avx512_run_task,
};
