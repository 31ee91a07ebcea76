/*
 * attention_avx512.c — the attention task with AVX-512 f32 FMA micro-GEMMs
 * (also the FLUX_PRECISION=f32 table on AVX512_BF16 CPUs). The tile walk
 * and the online softmax are attention_avx512_common.h; this file holds
 * the f32 packing and products:
 *   S  [KT][R] = K_tile · Qᵀ   rows of the task in the vector lanes:
 *                              8 keys × 48 rows = 24 zmm accumulators, K
 *                              broadcast, Qᵀ loaded (packed once per task)
 *   P                          overwrites S in place (f32)
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
#include <string.h>

/* The task's scratch (the f32 members are the common header's) and tile. */
typedef struct tile_bufs {
    float *qp, *s, *o, *m, *l, *alpha;
    const float *kp, *vp; /* the current tile in the packed K/V */
    int R, d, dp;
} tile_bufs;

#include "attention_avx512_common.h"

/* The scratch pieces ahead of the common ones (see the file comment). */
static void carve_packed(tile_bufs *b, void *base, size_t *off) {
    b->qp = piece(base, off, sizeof(float) * (size_t)b->d * (size_t)b->R);
}

/* qp[dd][r] = Q[row r][dd] · qscale; padding rows zero. Rows are first
 * copied (scaled) into o [R][Dp] — free until the first key tile — and
 * then transposed in 16×16 blocks. */
static void pack_q(const fx_attn_plan *p, const fx_attn_task *k, const tile_bufs *b) {
    const int R = b->R, d = b->d, dp = b->dp;
    const __m512 qs = _mm512_set1_ps(p->qscale);
    for (int r = 0; r < k->rows && r < PF_ROWS; r++) prefetch_row(fx_attn_q_row(p, k, r), 4 * d, 0);
    for (int r = 0; r < R; r++) {
        float *tr = b->o + (size_t)r * dp;
        if (r + PF_ROWS < k->rows) prefetch_row(fx_attn_q_row(p, k, r + PF_ROWS), 4 * d, 0);
        if (r < k->rows) {
            const float *q = fx_attn_q_row(p, k, r);
            for (int e = 0; e < dp; e += 16)
                _mm512_store_ps(tr + e, _mm512_mul_ps(_mm512_maskz_loadu_ps(lanes(d - e), q + e), qs));
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
                const __mmask16 mk = lanes(d - e);
                _mm512_mask_storeu_ps(kd + e, mk, _mm512_maskz_loadu_ps(mk, kr + e));
                _mm512_store_ps(vd + e, _mm512_maskz_loadu_ps(mk, vr + e));
            }
        }
    }
}

/* Key tile kb of the packed head: K rows at kv, V behind all of K. */
static void set_tile(tile_bufs *b, const fx_attn_plan *p, const void *kv, int64_t kb) {
    const float *kbase = kv;
    const float *vbase = kbase + up64((size_t)p->nkt * KT * b->d * sizeof(float)) / sizeof(float);
    b->kp = kbase + (size_t)kb * KT * b->d;
    b->vp = vbase + (size_t)kb * KT * b->dp;
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
            store_scores(b->s, R, jb, rb, c);
        }
    }
}

/* The f32 product reads P where S was: p of key 2jp (2jp+1) overwrites its score. */
static inline void store_probs(const tile_bufs *b, int jp, int rb, __m512 p0, __m512 p1) {
    float *s0 = b->s + (size_t)(2 * jp) * b->R + rb;
    _mm512_store_ps(s0, p0);
    _mm512_store_ps(s0 + b->R, p1);
}

/* o[rb..rb+5][db..db+16·ND) = α·o + Σ_jj p[jj][r] · vp[jj][...] */
static inline __attribute__((always_inline)) void pv_block(const tile_bufs *b, int rb, int db,
                                                           int first, const int ND) {
    const int R = b->R, dp = b->dp;
    __m512 c[MR][4];
    pv_start(b, rb, db, first, ND, c);
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
    pv_finish(b, rb, db, ND, c);
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
