/*
 * attention_avx2.c — the attention hooks with AVX2 f32 FMA micro-GEMMs
 * (16 ymm registers, 8 lanes); the driver is attention.c, the layout and
 * packing attention_f32.c, the online softmax attention_simd.h.
 *
 * A task's R rows (blocks of 24: three 8-lane vectors) are the vector
 * lanes of the score tile, key tiles of KT = 64 keys. Per tile:
 *   S  [KT][R] = K_tile · Qᵀ   4 keys × 24 rows = 12 ymm accumulators
 *                              (+ 3 Q vectors + 1 broadcast = 16)
 *   online softmax on S        8 rows at a time (attention_simd.h)
 *   O  [R][Dp] = α·O + P·V     6 rows × 16 dims = 12 ymm accumulators
 *                              (+ 2 V vectors + 1 broadcast)
 */
#include "attention.h"

#include "simd/common/vec_avx2.h"
#include "simd/common/vec_exp2.h"

enum { QT = 96, KT = 64, MK = 4, MR = 6, ROW_ALIGN = 24 };

#include "attention_simd.h"

/* s[jj][r] = Σ_dd kp[jj][dd] · qp[dd][r] for all KT keys and R rows. */
static void scores(const fx_attn_bufs *b) {
    const int R = b->R, d = b->d;
    const float *kp = b->kp, *qp = b->qp;
    for (int rb = 0; rb < R; rb += 24) {
        for (int jb = 0; jb < KT; jb += MK) {
            const float *kb = kp + (size_t)jb * d;
            const float *qb = qp + rb;
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

/* o[rb..rb+5][db..db+16) = α·o + Σ_jj p[jj][r] · vp[jj][db..db+16) */
static inline void pv_block(const fx_attn_bufs *b, int rb, int db, int first) {
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
        const float *vr = (const float *)b->vp + (size_t)jj * dp + db;
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

static void pv_tile(const fx_attn_bufs *b, int first) {
    for (int rb = 0; rb < b->R; rb += MR)
        for (int db = 0; db < b->dp; db += 16) pv_block(b, rb, db, first);
}

const struct fx_attn_kernels fx_attn_avx2 = {
    .name = "avx2 f32 fma",
    .qt = QT,
    .row_align = ROW_ALIGN,
    .kt = KT,
    .layout = fx_attn_f32_layout,
    .pack_kv = fx_attn_f32_pack_kv,
    .pack_q = fx_attn_f32_pack_q,
    .scores = scores,
    .softmax = softmax_tile,
    .pv = pv_tile,
    .store = store_rows,
};
