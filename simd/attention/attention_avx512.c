/*
 * attention_avx512.c — the attention hooks with AVX-512 f32 FMA
 * micro-GEMMs (also the FLUX_PRECISION=f32 table on AVX512_BF16 CPUs); the
 * driver is attention.c, the layout and packing attention_f32.c, the
 * online softmax attention_simd.h (16 rows at a time). Here the products:
 *   Qᵀ [d][R]                  packed once per task (the f32 layout) by
 *                              16×16 in-register transposes
 *   S  [KT][R] = K_tile · Qᵀ   rows of the task in the vector lanes:
 *                              8 keys × 48 rows = 24 zmm accumulators, K
 *                              broadcast, Qᵀ loaded
 *   P                          overwrites S in place (f32)
 *   O  [R][Dp] = α·O + P·V     6 rows × 64 dims = 24 zmm accumulators,
 *                              P broadcast, V loaded
 */
#include "attention_avx512_common.h"
#include "attention_simd.h"

/* qp[dd][r] = Q[row r][dd] · qscale; padding rows zero. Rows are first
 * copied (scaled) into o [R][Dp] — free until the first key tile — and
 * then transposed in 16×16 blocks. */
static void pack_q(const fx_attn_plan *p, const fx_attn_task *k, const fx_attn_bufs *b) {
    const int R = b->R, d = b->d, dp = b->dp;
    const __m512 qs = _mm512_set1_ps(p->qscale);
    for (int r = 0; r < k->rows && r < FX_ATTN_PF_ROWS; r++) fx_attn_prefetch_row(fx_attn_q_row(p, k, r), 4 * d, 0);
    for (int r = 0; r < R; r++) {
        float *tr = b->o + (size_t)r * dp;
        if (r + FX_ATTN_PF_ROWS < k->rows) fx_attn_prefetch_row(fx_attn_q_row(p, k, r + FX_ATTN_PF_ROWS), 4 * d, 0);
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
                        (uint32_t *)((float *)b->qp + (size_t)e0 * R + r0), (size_t)R, d - e0 < 16 ? d - e0 : 16);
}

/* s[jj][r] = Σ_dd kp[jj][dd] · qp[dd][r] for all KT keys and R rows. */
static void scores(const fx_attn_bufs *b) {
    const int R = b->R, d = b->d;
    const float *kp = b->kp, *qp = b->qp;
    for (int rb = 0; rb < R; rb += 48) {
        for (int jb = 0; jb < KT; jb += MK) {
            const float *kb = kp + (size_t)jb * d;
            const float *qb = qp + rb;
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

/* o[rb..rb+5][db..db+16·ND) = α·o + Σ_jj p[jj][r] · vp[jj][...] */
static inline __attribute__((always_inline)) void pv_block(const fx_attn_bufs *b, int rb, int db,
                                                           int first, const int ND) {
    const int R = b->R, dp = b->dp;
    __m512 c[MR][4];
    pv_start(b, rb, db, first, ND, c);
    for (int jj = 0; jj < KT; jj++) {
        const float *vr = (const float *)b->vp + (size_t)jj * dp + db;
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

FX_ATTN_AVX512_PV_TILE(pv_tile)

const struct fx_attn_kernels fx_attn_avx512 = {
    .name = "avx512 f32 fma",
    .qt = QT,
    .row_align = ROW_ALIGN,
    .kt = KT,
    .layout = fx_attn_f32_layout,
    .pack_kv = fx_attn_f32_pack_kv,
    .pack_q = pack_q,
    .scores = scores,
    .softmax = softmax_tile,
    .pv = pv_tile,
    .store = store_rows,
};
