/*
 * attention_avx512bf16.c — the attention task with vdpbf16ps micro-GEMMs
 * (AVX512_BF16 tables; FLUX_PRECISION=f32 uses attention_avx512.c).
 *
 * Same tile walk as attention_avx512.c (rows of the task in the vector
 * lanes, R rows in blocks of 48, key tiles of KT = 64), but both products
 * take bf16 pairs and accumulate in f32:
 *   S [KT][R] = K·Qᵀ   vdpbf16ps over pairs of head dims: each lane holds
 *                      (q[r][2i], q[r][2i+1]), the broadcast holds
 *                      (k[j][2i], k[j][2i+1]); 8 keys × 48 rows = 24 zmm
 *   softmax in f32     p = 2^(s − m) rounded to bf16 for the next product;
 *                      the running sum l adds the unrounded p
 *   O [R][Dp] += P·V   vdpbf16ps over pairs of keys: each lane holds
 *                      (v[2t][c], v[2t+1][c]), the broadcast holds
 *                      (p[r][2t], p[r][2t+1]); 6 rows × 64 dims = 24 zmm
 * Q (times scale·log2 e), K, P and V are rounded to nearest-even bf16;
 * every sum is f32. Relative error vs exact attention is ~2^-9 per factor.
 *
 * Scratch (64-byte aligned pieces), Dp = d rounded up to 16, pairs are
 * uint32 holding two bf16 (the lower-index element in the low half):
 *   qp [d/2][R] pairs   kp [KT][d] bf16   vp [KT/2][Dp] pairs
 *   s [KT][R] f32   pp [KT/2][R] pairs   o [R][Dp] f32   m, l, alpha [R]
 */
#include "attention.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

enum { QT = 96, KT = 64, MK = 8, MR = 6, ROW_ALIGN = 48 };

typedef struct tile_bufs {
    uint32_t *qp, *vp, *pp;
    uint16_t *kp;
    float *s, *o, *m, *l, *alpha;
    int R, d, dp;
} tile_bufs;

static size_t up64(size_t bytes) { return (bytes + 63) & ~(size_t)63; }

/* Carve the scratch (base may be NULL to measure); returns bytes used. */
static size_t carve(const fx_attn_plan *p, void *base, tile_bufs *b) {
    const size_t R = (size_t)p->rows_pad, d = (size_t)p->a.d, dp = (d + 15) & ~(size_t)15;
    const size_t bytes[9] = {4 * (d / 2) * R, 2 * (size_t)KT * d, 4 * (size_t)(KT / 2) * dp,
                             4 * (size_t)KT * R, 4 * (size_t)(KT / 2) * R, 4 * R * dp,
                             4 * R, 4 * R, 4 * R};
    void **dst[9] = {(void **)&b->qp, (void **)&b->kp, (void **)&b->vp, (void **)&b->s,
                     (void **)&b->pp, (void **)&b->o, (void **)&b->m, (void **)&b->l,
                     (void **)&b->alpha};
    size_t off = 0;
    for (int i = 0; i < 9; i++) {
        *dst[i] = base ? (char *)base + off : NULL;
        off += up64(bytes[i]);
    }
    b->R = (int)R;
    b->d = (int)d;
    b->dp = (int)dp;
    return off;
}

static size_t bf16_scratch_bytes(const fx_attn_plan *p) {
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

/* bf16 pairs (a[i], b[i]) in lane i: round both to bf16 and interleave. */
static inline __m512i pair_bf16(__m512 a, __m512 b) {
    const __m512i ab = (__m512i)_mm512_cvtne2ps_pbh(b, a); /* a0..a15 b0..b15 */
    const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9,
                                         24, 8, 23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1,
                                         16, 0);
    return _mm512_permutexvar_epi16(idx, ab);
}

/* Mask of the first n lanes (n clamped to 0..16). */
static inline __mmask16 lanes(int n) {
    return n >= 16 ? (__mmask16)0xffff : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1);
}

/* 32 consecutive floats times scale (n valid, zero beyond) → 32 bf16 in order. */
static inline __m512i row_bf16(const float *src, int n, __m512 scale) {
    const __m512 lo = _mm512_mul_ps(_mm512_maskz_loadu_ps(lanes(n), src), scale);
    const __m512 hi = _mm512_mul_ps(_mm512_maskz_loadu_ps(lanes(n - 16), src + 16), scale);
    return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
}

/* qp[i][r] = bf16 pair (Q[r][2i], Q[r][2i+1]) · qscale; padding rows zero. */
static void pack_q(const fx_attn_plan *p, const fx_attn_task *k, const tile_bufs *b) {
    const int R = b->R, d = b->d, half = d / 2;
    const __m512 qs = _mm512_set1_ps(p->qscale);
    const __m512i stride = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6,
                                                               5, 4, 3, 2, 1, 0),
                                              _mm512_set1_epi32(R));
    for (int r = 0; r < R; r++) {
        const float *q = r < k->rows ? fx_attn_q_row(p, k, r) : NULL;
        for (int i = 0; i < half; i += 16) {
            const __m512i pairs = q ? row_bf16(q + 2 * i, d - 2 * i, qs) : _mm512_setzero_si512();
            _mm512_mask_i32scatter_epi32(b->qp + (size_t)i * R + r, lanes(half - i), stride, pairs, 4);
        }
    }
}

/* Keys [j0, j0 + nj) of kv head g → kp (bf16 rows) and vp (key pairs);
 * keys nj..KT−1 are zero. */
static void pack_kv(const fx_attn_plan *p, int g, int64_t j0, int nj, const tile_bufs *b) {
    const int d = b->d, dp = b->dp;
    const float *ksrc = p->a.k + j0 * p->a.ldk + (int64_t)g * d;
    const float *vsrc = p->a.v + j0 * p->a.ldv + (int64_t)g * d;
    for (int jj = 0; jj < nj; jj++) {
        const float *kr = ksrc + jj * p->a.ldk;
        uint16_t *kd = b->kp + (size_t)jj * d;
        for (int e = 0; e < d; e += 32) {
            const __m512i x = row_bf16(kr + e, d - e, _mm512_set1_ps(1.0f));
            const int n = d - e < 32 ? d - e : 32;
            _mm512_mask_storeu_epi16(kd + e, n == 32 ? ~(__mmask32)0 : (((__mmask32)1 << n) - 1), x);
        }
    }
    if (nj < KT) memset(b->kp + (size_t)nj * d, 0, 2 * (size_t)(KT - nj) * d);
    for (int jp = 0; jp < KT / 2; jp++) {
        const int j = 2 * jp;
        uint32_t *vd = b->vp + (size_t)jp * dp;
        if (j >= nj) {
            memset(vd, 0, 4 * (size_t)dp);
            continue;
        }
        const float *v0 = vsrc + j * p->a.ldv, *v1 = v0 + p->a.ldv;
        const int has1 = j + 1 < nj;
        for (int c = 0; c < dp; c += 16) {
            const __mmask16 mk = lanes(d - c);
            const __m512 a = _mm512_maskz_loadu_ps(mk, v0 + c);
            const __m512 bb = has1 ? _mm512_maskz_loadu_ps(mk, v1 + c) : _mm512_setzero_ps();
            _mm512_store_si512(vd + c, pair_bf16(a, bb));
        }
    }
}

/* The next key tile's K and V rows, a few cache lines per score-kernel
 * iteration (see attention_avx512.c: rows 4 KiB-multiples apart defeat
 * the hardware prefetchers). */
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

/* s[jj][r] = Σ_i kp pair i of key jj · qp[i][r], all KT keys and R rows. */
static void scores(const tile_bufs *b, pf_stream *pf) {
    const int R = b->R, half = b->d / 2;
    const uint32_t *k32 = (const uint32_t *)b->kp; /* key jj, pair i at jj·half + i */
    for (int rb = 0; rb < R; rb += 48) {
        for (int jb = 0; jb < KT; jb += MK) {
            const uint32_t *kb = k32 + (size_t)jb * half;
            const uint32_t *qb = b->qp + rb;
            __m512 c[MK][3];
#pragma GCC unroll 8
            for (int i = 0; i < MK; i++) c[i][0] = c[i][1] = c[i][2] = _mm512_setzero_ps();
            for (int i = 0; i < half; i++) {
                const uint32_t *qd = qb + (size_t)i * R;
                pf_step(pf);
                const __m512bh q0 = (__m512bh)_mm512_load_si512(qd),
                               q1 = (__m512bh)_mm512_load_si512(qd + 16),
                               q2 = (__m512bh)_mm512_load_si512(qd + 32);
#pragma GCC unroll 8
                for (int t = 0; t < MK; t++) {
                    const __m512bh kv = (__m512bh)_mm512_set1_epi32((int)kb[(size_t)t * half + i]);
                    c[t][0] = _mm512_dpbf16_ps(c[t][0], kv, q0);
                    c[t][1] = _mm512_dpbf16_ps(c[t][1], kv, q1);
                    c[t][2] = _mm512_dpbf16_ps(c[t][2], kv, q2);
                }
            }
#pragma GCC unroll 8
            for (int t = 0; t < MK; t++) {
                float *sr = b->s + (size_t)(jb + t) * R + rb;
                _mm512_store_ps(sr, c[t][0]);
                _mm512_store_ps(sr + 16, c[t][1]);
                _mm512_store_ps(sr + 32, c[t][2]);
            }
        }
    }
}

/* Online softmax over the tile, 16 rows at a time: new max, α, l, and
 * the probabilities as bf16 key pairs in pp. */
static void softmax_tile(const tile_bufs *b) {
    const int R = b->R;
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    for (int rb = 0; rb < R; rb += 16) {
        const __m512 mold = _mm512_load_ps(b->m + rb);
        __m512 mx = mold;
        for (int jj = 0; jj < KT; jj++) mx = _mm512_max_ps(mx, _mm512_load_ps(b->s + (size_t)jj * R + rb));
        const __m512 use = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(mx, ninf, _CMP_EQ_OQ), mx,
                                                _mm512_setzero_ps());
        const __m512 alpha = exp2_ps(_mm512_sub_ps(mold, use));
        __m512 sum0 = _mm512_setzero_ps(), sum1 = _mm512_setzero_ps();
        for (int jp = 0; jp < KT / 2; jp++) {
            const float *s0 = b->s + (size_t)(2 * jp) * R + rb, *s1 = s0 + R;
            const __m512 p0 = exp2_ps(_mm512_sub_ps(_mm512_load_ps(s0), use));
            const __m512 p1 = exp2_ps(_mm512_sub_ps(_mm512_load_ps(s1), use));
            _mm512_store_si512(b->pp + (size_t)jp * R + rb, pair_bf16(p0, p1));
            sum0 = _mm512_add_ps(sum0, p0);
            sum1 = _mm512_add_ps(sum1, p1);
        }
        _mm512_store_ps(b->m + rb, mx);
        _mm512_store_ps(b->alpha + rb, alpha);
        _mm512_store_ps(b->l + rb, _mm512_fmadd_ps(_mm512_load_ps(b->l + rb), alpha,
                                                   _mm512_add_ps(sum0, sum1)));
    }
}

/* o[rb..rb+5][db..db+16·ND) = α·o + Σ_t P pair t of the row · vp[t][...] */
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
    for (int t = 0; t < KT / 2; t++) {
        const uint32_t *vr = b->vp + (size_t)t * dp + db;
        const uint32_t *pr = b->pp + (size_t)t * R + rb;
        __m512bh vv[4];
#pragma GCC unroll 4
        for (int v = 0; v < ND; v++) vv[v] = (__m512bh)_mm512_load_si512(vr + 16 * v);
#pragma GCC unroll 6
        for (int i = 0; i < MR; i++) {
            const __m512bh pv = (__m512bh)_mm512_set1_epi32((int)pr[i]);
#pragma GCC unroll 4
            for (int v = 0; v < ND; v++) c[i][v] = _mm512_dpbf16_ps(c[i][v], pv, vv[v]);
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

static void bf16_run_task(const fx_attn_plan *p, int64_t t, void *scratch) {
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
        pf_init(&pf, p, k.g, j0 + KT, (b.R / 48) * (KT / MK) * (b.d / 2));
        scores(&b, &pf);
        if (vis == FX_ATTN_PARTIAL) fx_attn_mask_tile(p, &k, kb, b.s, b.R);
        softmax_tile(&b);
        pv_tile(&b, first);
        first = 0;
    }
    store_output(p, &k, &b, !first);
}

const struct fx_attn_kernels fx_attn_avx512bf16 = {
    .name = "avx512bf16 vdpbf16ps 96x64",
    .qt = QT,
    .row_align = ROW_ALIGN,
    .kt = KT,
    .scratch_bytes = bf16_scratch_bytes,
    .run_task = bf16_run_task,
};
