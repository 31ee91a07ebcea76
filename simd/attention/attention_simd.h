/*
 * attention_simd.h — the online softmax of a key tile, written once over
 * the vector vocabulary (vec_avx2.h, vec_avx512.h, vec_neon.h and
 * vec_exp2.h) and compiled by each SIMD attention file that includes it
 * (the rowops_simd.h pattern). The task's rows lie in the vector lanes
 * (s [KT][R], rows along a row of s), so the max, exp2 and sums are all
 * vertical: no horizontal reductions. Per FX_W rows:
 *   m_new = max(m, max_j s[j])    (rows that saw no key keep −inf and
 *                                  subtract 0 below)
 *   α     = 2^(m − m_new)
 *   p[j]  = 2^(s[j] − m_new)      by key pairs (2jp, 2jp + 1), handed to
 *                                  STORE_PROBS; even keys summed in one
 *                                  accumulator, odd keys in another
 *   l     = α·l + (sum_even + sum_odd)   (one FMA)
 *
 * The including file defines KT (keys per tile) and may define
 * STORE_PROBS(b, jp, rb, s0, p0, p1) (keys 2jp and 2jp+1 of rows rb.. ;
 * s0 = their scores' row in s); by default P overwrites S.
 *
 * Also here: store_rows, the end of a task for tables that keep O as
 * [R][Dp] rows (the f32 layout of attention_f32.c, avx512bf16): the same
 * products as fx_attn_f32_store (out = o · (1/l), one rounding), vectorised.
 */
#ifndef FX_ATTENTION_SIMD_H
#define FX_ATTENTION_SIMD_H

#include <string.h>

#ifndef STORE_PROBS
#define STORE_PROBS(b, jp, rb, s0, p0, p1) (V_STORE((s0), (p0)), V_STORE((s0) + (b)->R, (p1)))
#endif

static void softmax_tile(const fx_attn_bufs *b) {
    const int R = b->R;
    const fxv zero = V_SET1(0.0f);
    for (int rb = 0; rb < R; rb += FX_W) {
        const fxv mold = V_LOAD(b->m + rb);
        fxv mx = mold;
        for (int jj = 0; jj < KT; jj++) mx = V_MAX(mx, V_LOAD(b->s + (size_t)jj * R + rb));
        const fxv use = v_ninf_to_zero(mx);
        const fxv alpha = v_exp2(V_SUB(mold, use));
        fxv sum0 = zero, sum1 = zero;
        for (int jp = 0; jp < KT / 2; jp++) {
            float *s0 = b->s + (size_t)(2 * jp) * R + rb;
            const fxv p0 = v_exp2(V_SUB(V_LOAD(s0), use));
            const fxv p1 = v_exp2(V_SUB(V_LOAD(s0 + R), use));
            STORE_PROBS(b, jp, rb, s0, p0, p1);
            sum0 = V_ADD(sum0, p0);
            sum1 = V_ADD(sum1, p1);
        }
        V_STORE(b->m + rb, mx);
        V_STORE(b->alpha + rb, alpha);
        V_STORE(b->l + rb, V_FMA(V_LOAD(b->l + rb), alpha, V_ADD(sum0, sum1)));
    }
}

/* out[row] = O[row] / l[row] for the task's rows (O [R][Dp]); zeros for rows
 * that saw no key. */
static inline void store_rows(const fx_attn_plan *p, const fx_attn_task *k, const fx_attn_bufs *b, int any) {
    const int d = b->d;
    for (int r = 0; r < k->rows; r++) {
        float *out = fx_attn_o_row(p, k, r);
        if (r + FX_ATTN_PF_ROWS < k->rows) fx_attn_prefetch_row(fx_attn_o_row(p, k, r + FX_ATTN_PF_ROWS), 4 * d, 1);
        const float lr = any ? b->l[r] : 0.0f;
        if (!(lr > 0.0f)) {
            memset(out, 0, sizeof(float) * (size_t)d);
            continue;
        }
        const float inv = 1.0f / lr;
        const fxv vinv = V_SET1(inv);
        const float *orow = b->o + (size_t)r * (size_t)b->dp;
        int e = 0;
        for (; e + FX_W <= d; e += FX_W) V_STORE(out + e, V_MUL(V_LOAD(orow + e), vinv));
        for (; e < d; e++) out[e] = orow[e] * inv;
    }
}

#endif
