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
 * Pairs are uint32 holding two bf16 (the lower-index element in the low
 * half). K and V are packed once per call (attention.c: pack_kv), per kv
 * head: K [nkt·KT][d] bf16, V [nkt·KT/2][Dp] key pairs (Dp = d rounded up
 * to 16; zeros past sk and past d).
 *
 * Per-task scratch (64-byte aligned pieces):
 *   qp [d/2][R] pairs   s [KT][R] f32   pp [KT/2][R] pairs   o [R][Dp] f32
 *   m, l, alpha [R]
 */
#include "attention.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

enum { QT = 96, KT = 64, MK = 8, MR = 6, ROW_ALIGN = 48 };

typedef struct tile_bufs {
    uint32_t *qp, *pp;
    float *s, *o, *m, *l, *alpha;
    const uint16_t *kp; /* the current tile in the packed K/V */
    const uint32_t *vp;
    int R, d, dp;
} tile_bufs;

static size_t up64(size_t bytes) { return (bytes + 63) & ~(size_t)63; }

/* Carve the scratch (base may be NULL to measure); returns bytes used. */
static size_t carve(const fx_attn_plan *p, void *base, tile_bufs *b) {
    const size_t R = (size_t)p->rows_pad, d = (size_t)p->a.d, dp = (d + 15) & ~(size_t)15;
    const size_t bytes[7] = {4 * (d / 2) * R, 4 * (size_t)KT * R, 4 * (size_t)(KT / 2) * R,
                             4 * R * dp, 4 * R, 4 * R, 4 * R};
    void **dst[7] = {(void **)&b->qp, (void **)&b->s, (void **)&b->pp, (void **)&b->o,
                     (void **)&b->m, (void **)&b->l, (void **)&b->alpha};
    size_t off = 0;
    for (int i = 0; i < 7; i++) {
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

/* qp[i][r] = bf16 pair (Q[r][2i], Q[r][2i+1]) · qscale; padding rows zero.
 * Rows are first converted into o [R][Dp] (as pairs; free until the first
 * key tile), then transposed in 16×16 blocks. */
enum { PF_ROWS = 4 }; /* rows fetched ahead */
static void pack_q(const fx_attn_plan *p, const fx_attn_task *k, const tile_bufs *b) {
    const int R = b->R, d = b->d, half = d / 2, dp = b->dp;
    const __m512 qs = _mm512_set1_ps(p->qscale);
    uint32_t *tmp = (uint32_t *)b->o; /* [R][dp] pairs, only the first half used */
    for (int r = 0; r < k->rows && r < PF_ROWS; r++) prefetch_row(fx_attn_q_row(p, k, r), 4 * d, 0);
    for (int r = 0; r < R; r++) {
        uint32_t *tr = tmp + (size_t)r * dp;
        if (r + PF_ROWS < k->rows) prefetch_row(fx_attn_q_row(p, k, r + PF_ROWS), 4 * d, 0);
        const float *q = r < k->rows ? fx_attn_q_row(p, k, r) : NULL;
        for (int i = 0; i < half; i += 16)
            _mm512_storeu_si512(tr + i, q ? row_bf16(q + 2 * i, d - 2 * i, qs) : _mm512_setzero_si512());
    }
    for (int r0 = 0; r0 < R; r0 += 16)
        for (int i0 = 0; i0 < half; i0 += 16)
            transpose16(tmp + (size_t)r0 * dp + i0, (size_t)dp, b->qp + (size_t)i0 * R + r0,
                        (size_t)R, half - i0 < 16 ? half - i0 : 16);
}

/* Bytes of one kv head's packed K and V. */
static size_t bf16_kv_head_bytes(const fx_attn_plan *p) {
    const size_t rows = (size_t)p->nkt * KT, d = (size_t)p->a.d, dp = (d + 15) & ~(size_t)15;
    return up64(rows * d * 2) + up64(rows / 2 * dp * 4);
}

/* Key tiles [kb0, kb1) of kv head g → K rows in bf16 and V key pairs. */
static void bf16_pack_kv(const fx_attn_plan *p, int g, int64_t kb0, int64_t kb1, void *dst) {
    const int d = p->a.d, dp = (d + 15) & ~15;
    uint16_t *kbase = dst;
    uint32_t *vbase = (uint32_t *)((char *)dst + up64((size_t)p->nkt * KT * d * 2));
    const __m512 one = _mm512_set1_ps(1.0f);
    for (int64_t kb = kb0; kb < kb1; kb++) {
        if (p->key_tiles[kb] == FX_ATTN_KEYS_NONE) continue; /* never read */
        for (int64_t j = kb * KT; j < (kb + 1) * KT; j += 2) {
            uint16_t *k0 = kbase + (size_t)j * d;
            uint32_t *vd = vbase + (size_t)(j / 2) * dp;
            const int has0 = j < p->a.sk, has1 = j + 1 < p->a.sk;
            const float *kr0 = p->a.k + j * p->a.ldk + (int64_t)g * d, *kr1 = kr0 + p->a.ldk;
            const float *vr0 = p->a.v + j * p->a.ldv + (int64_t)g * d, *vr1 = vr0 + p->a.ldv;
            for (int e = 0; e < d; e += 32) {
                const __mmask32 mk = d - e >= 32 ? ~(__mmask32)0 : (((__mmask32)1 << (d - e)) - 1);
                _mm512_mask_storeu_epi16(k0 + e, mk, has0 ? row_bf16(kr0 + e, d - e, one)
                                                          : _mm512_setzero_si512());
                _mm512_mask_storeu_epi16(k0 + d + e, mk, has1 ? row_bf16(kr1 + e, d - e, one)
                                                              : _mm512_setzero_si512());
            }
            for (int c = 0; c < dp; c += 16) {
                const __mmask16 mk = lanes(d - c);
                const __m512 a = has0 ? _mm512_maskz_loadu_ps(mk, vr0 + c) : _mm512_setzero_ps();
                const __m512 bb = has1 ? _mm512_maskz_loadu_ps(mk, vr1 + c) : _mm512_setzero_ps();
                _mm512_store_si512(vd + c, pair_bf16(a, bb));
            }
        }
    }
}

/* s[jj][r] = Σ_i kp pair i of key jj · qp[i][r], all KT keys and R rows. */
static void scores(const tile_bufs *b) {
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

static void bf16_run_task(const fx_attn_plan *p, int64_t t, void *scratch) {
    const fx_attn_task k = fx_attn_task_of(p, t);
    tile_bufs b;
    carve(p, scratch, &b);
    const uint16_t *kbase = fx_attn_kv_head(p, k.g);
    const uint32_t *vbase =
        (const uint32_t *)((const char *)kbase + up64((size_t)p->nkt * KT * b.d * 2));
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
        b.kp = kbase + (size_t)kb * KT * b.d;
        b.vp = vbase + (size_t)kb * (KT / 2) * b.dp;
        scores(&b);
        if (vis == FX_ATTN_PARTIAL) fx_attn_mask_tile(p, &k, kb, b.s, b.R);
        softmax_tile(&b);
        pv_tile(&b, first);
        first = 0;
    }
    store_output(p, &k, &b, !first);
}

const struct fx_attn_kernels fx_attn_avx512bf16 = {
    .name = "avx512bf16 vdpbf16ps (bf16 Q, K, P, V; f32 sums)",
    .qt = QT,
    .row_align = ROW_ALIGN,
    .kt = KT,
    .scratch_bytes = bf16_scratch_bytes,
    .kv_head_bytes = bf16_kv_head_bytes,
    .pack_kv = bf16_pack_kv,
    .run_task = bf16_run_task,
};
