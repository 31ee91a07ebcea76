/*
 * attention_neon.c — the attention hooks with aarch64 NEON f32 FMA
 * micro-GEMMs (32 registers of 4 lanes); the driver is attention.c, the
 * layout and packing attention_f32.c, the online softmax attention_simd.h.
 *
 * A task's R rows (blocks of 16: four 4-lane vectors) are the vector
 * lanes of the score tile, key tiles of KT = 64 keys. Per tile:
 *   S  [KT][R] = K_tile · Qᵀ   4 keys × 16 rows = 16 accumulators,
 *                              K broadcast by ld1r, Qᵀ loaded
 *   online softmax on S        4 rows at a time (attention_simd.h)
 *   O  [R][Dp] = α·O + P·V     4 rows × 16 dims = 16 accumulators; the
 *                              4 rows' p of a key are one vector (s is
 *                              [KT][R]) used by lane-indexed FMAs
 */
#include "attention.h"

#include "simd/common/vec_neon.h"
#include "simd/common/vec_exp2.h"

enum { QT = 64, KT = 64, MK = 4, MR = 4, ROW_ALIGN = 16 };

#include "attention_simd.h"

/* s[jj][r] = Σ_dd kp[jj][dd] · qp[dd][r] for all KT keys and R rows. */
static void scores(const fx_attn_bufs *b) {
    const int R = b->R, d = b->d;
    const float *kp = b->kp, *qp = b->qp;
    for (int rb = 0; rb < R; rb += 16) {
        for (int jb = 0; jb < KT; jb += MK) {
            const float *kb = kp + (size_t)jb * d;
            const float *qb = qp + rb;
            float32x4_t c[MK][4];
            for (int i = 0; i < MK; i++) c[i][0] = c[i][1] = c[i][2] = c[i][3] = vdupq_n_f32(0.0f);
            for (int dd = 0; dd < d; dd++) {
                const float *qd = qb + (size_t)dd * R;
                const float32x4_t q0 = vld1q_f32(qd), q1 = vld1q_f32(qd + 4),
                                  q2 = vld1q_f32(qd + 8), q3 = vld1q_f32(qd + 12);
                for (int i = 0; i < MK; i++) {
                    const float32x4_t kv = vld1q_dup_f32(kb + (size_t)i * d + dd);
                    c[i][0] = vfmaq_f32(c[i][0], kv, q0);
                    c[i][1] = vfmaq_f32(c[i][1], kv, q1);
                    c[i][2] = vfmaq_f32(c[i][2], kv, q2);
                    c[i][3] = vfmaq_f32(c[i][3], kv, q3);
                }
            }
            for (int i = 0; i < MK; i++) {
                float *sr = b->s + (size_t)(jb + i) * R + rb;
                vst1q_f32(sr, c[i][0]);
                vst1q_f32(sr + 4, c[i][1]);
                vst1q_f32(sr + 8, c[i][2]);
                vst1q_f32(sr + 12, c[i][3]);
            }
        }
    }
}

/* o[rb..rb+3][db..db+16) = α·o + Σ_jj p[jj][r] · vp[jj][db..db+16) */
static void pv_block(const fx_attn_bufs *b, int rb, int db, int first) {
    const int R = b->R, dp = b->dp;
    float32x4_t c[MR][4];
    for (int i = 0; i < MR; i++) {
        const float *orow = b->o + (size_t)(rb + i) * dp + db;
        for (int v = 0; v < 4; v++)
            c[i][v] = first ? vdupq_n_f32(0.0f) : vmulq_n_f32(vld1q_f32(orow + 4 * v), b->alpha[rb + i]);
    }
    for (int jj = 0; jj < KT; jj++) {
        const float *vr = (const float *)b->vp + (size_t)jj * dp + db;
        const float32x4_t pv = vld1q_f32(b->s + (size_t)jj * R + rb); /* p of rows rb..rb+3 */
        const float32x4_t v0 = vld1q_f32(vr), v1 = vld1q_f32(vr + 4), v2 = vld1q_f32(vr + 8),
                          v3 = vld1q_f32(vr + 12);
#define FX_PV_ROW(i)                                                                   \
    c[i][0] = vfmaq_laneq_f32(c[i][0], v0, pv, i);                                     \
    c[i][1] = vfmaq_laneq_f32(c[i][1], v1, pv, i);                                     \
    c[i][2] = vfmaq_laneq_f32(c[i][2], v2, pv, i);                                     \
    c[i][3] = vfmaq_laneq_f32(c[i][3], v3, pv, i);
        FX_PV_ROW(0)
        FX_PV_ROW(1)
        FX_PV_ROW(2)
        FX_PV_ROW(3)
#undef FX_PV_ROW
    }
    for (int i = 0; i < MR; i++) {
        float *orow = b->o + (size_t)(rb + i) * dp + db;
        for (int v = 0; v < 4; v++) vst1q_f32(orow + 4 * v, c[i][v]);
    }
}

static void pv_tile(const fx_attn_bufs *b, int first) {
    for (int rb = 0; rb < b->R; rb += MR)
        for (int db = 0; db < b->dp; db += 16) pv_block(b, rb, db, first);
}

const struct fx_attn_kernels fx_attn_neon = {
    .name = "neon f32 fma",
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
