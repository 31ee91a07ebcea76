/*
 * attention_avx512bf16.c — the attention hooks with vdpbf16ps micro-GEMMs
 * (AVX512_BF16 tables; FLUX_PRECISION=f32 uses attention_avx512.c). The
 * driver is attention.c, the online softmax attention_simd.h (16 rows at
 * a time); here both products take bf16 pairs and accumulate in f32:
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
 * Layout (pairs are uint32 holding two bf16, the lower-index element in
 * the low half; Dp = d rounded up to 16):
 *   qp [d/2][R] pairs of dims        pp [KT/2][R] pairs of keys
 *   K tile [KT][d] bf16              V tile [KT/2][Dp] pairs of keys
 *   O [R][Dp] f32 (stored by attention_f32.c)
 * with zeros past sk and past d.
 */
#include <stdint.h>

#include "attention_avx512_common.h"
#include "attention_bf16.h"
#include "attention_simd.h"

static fx_attn_layout bf16_layout(const fx_attn_plan *p) {
    const size_t R = (size_t)p->rows_pad, d = (size_t)p->a.d, dp = (d + 15) & ~(size_t)15;
    fx_attn_layout l = {
        .q_bytes = 4 * (d / 2) * R,
        .p_bytes = 4 * (size_t)(KT / 2) * R,
        .k_tile_bytes = 2 * (size_t)KT * d,
        .v_tile_bytes = 4 * (size_t)(KT / 2) * dp,
    };
    return l;
}

/* qp[i][r] = bf16 pair (Q[r][2i], Q[r][2i+1]) · qscale; padding rows zero.
 * Rows are first converted into o [R][Dp] (as pairs; free until the first
 * key tile), then transposed in 16×16 blocks. */
static void bf16_pack_q(const fx_attn_plan *p, const fx_attn_task *k, const fx_attn_bufs *b) {
    pack_q_pairs(p, k, b->R, b->d, (uint32_t *)b->o, b->dp, b->qp, b->d / 2);
}

/* Key tile kb of kv head g → K rows in bf16 and V key pairs. */
static void bf16_pack_kv(const fx_attn_plan *p, int g, int64_t kb, void *kdst, void *vdst) {
    const int d = p->a.d, dp = (d + 15) & ~15;
    const __m512 one = _mm512_set1_ps(1.0f);
    for (int jj = 0; jj < KT; jj += 2) {
        const int64_t j = kb * KT + jj;
        uint16_t *k0 = (uint16_t *)kdst + (size_t)jj * d;
        uint32_t *vd = (uint32_t *)vdst + (size_t)(jj / 2) * dp;
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

/* s[jj][r] = Σ_i kp pair i of key jj · qp[i][r], all KT keys and R rows. */
static void scores(const fx_attn_bufs *b) {
    const int R = b->R, half = b->d / 2;
    const uint32_t *k32 = (const uint32_t *)b->kp; /* key jj, pair i at jj·half + i */
    for (int rb = 0; rb < R; rb += 48) {
        for (int jb = 0; jb < KT; jb += MK) {
            const uint32_t *kb = k32 + (size_t)jb * half;
            const uint32_t *qb = (const uint32_t *)b->qp + rb;
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
            store_scores(b->s, R, jb, rb, c);
        }
    }
}

/* o[rb..rb+5][db..db+16·ND) = α·o + Σ_t P pair t of the row · vp[t][...] */
static inline __attribute__((always_inline)) void pv_block(const fx_attn_bufs *b, int rb, int db,
                                                           int first, const int ND) {
    const int R = b->R, dp = b->dp;
    __m512 c[MR][4];
    pv_start(b, rb, db, first, ND, c);
    for (int t = 0; t < KT / 2; t++) {
        const uint32_t *vr = (const uint32_t *)b->vp + (size_t)t * dp + db;
        const uint32_t *pr = (const uint32_t *)b->pp + (size_t)t * R + rb;
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
    pv_finish(b, rb, db, ND, c);
}

FX_ATTN_AVX512_PV_TILE(pv_tile)

const struct fx_attn_kernels fx_attn_avx512bf16 = {
    .name = "avx512bf16 vdpbf16ps (bf16 Q, K, P, V; f32 sums)",
    .qt = QT,
    .row_align = ROW_ALIGN,
    .kt = KT,
    .layout = bf16_layout,
    .pack_kv = bf16_pack_kv,
    .pack_q = bf16_pack_q,
    .scores = scores,
    .softmax = softmax_tile,
    .pv = pv_tile,
    .store = store_rows,
};
