/*
 * attention_neon.c — the attention task with aarch64 NEON f32 FMA
 * micro-GEMMs (32 registers of 4 lanes).
 *
 * Same tile walk as attention_avx512.c: a task's R rows (blocks of 16:
 * four 4-lane vectors) are the vector lanes of the score tile, key tiles
 * of KT = 64 keys. Per tile:
 *   S  [KT][R] = K_tile · Qᵀ   4 keys × 16 rows = 16 accumulators,
 *                              K broadcast by ld1r, Qᵀ loaded
 *   online softmax on S        column max / exp2 / sums, all vertical
 *   O  [R][Dp] = α·O + P·V     4 rows × 16 dims = 16 accumulators; the
 *                              4 rows' p of a key are one vector (s is
 *                              [KT][R]) used by lane-indexed FMAs
 * K and V are packed once per call (attention.c: pack_kv), per kv head:
 *   K [nkt·KT][d]  V [nkt·KT][Dp]   (Dp = d rounded up to 16; zero rows
 *                                    past sk, zero columns past d)
 *
 * Per-task scratch (floats, every piece 64-byte aligned):
 *   qp [d][R] (Q·scale·log2 e, transposed)  s [KT][R]  o [R][Dp]
 *   m, l, alpha [R]
 */
#include "attention.h"

#include <arm_neon.h>
#include <math.h>
#include <string.h>

enum { QT = 64, KT = 64, MK = 4, MR = 4, ROW_ALIGN = 16 };

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

static size_t neon_scratch_bytes(const fx_attn_plan *p) {
    tile_bufs b;
    return carve(p, NULL, &b);
}

/* 2^x for x <= 0 (−inf → 0): x = n + f, |f| <= 1/2, 2^f by a degree-6
 * minimax polynomial (relative error 1.6e-8); 2^n built in the exponent
 * field, with x clamped at −127 where 2^n becomes +0. */
static inline float32x4_t exp2_ps(float32x4_t x) {
    x = vmaxq_f32(x, vdupq_n_f32(-127.0f));
    const float32x4_t n = vrndnq_f32(x);
    const float32x4_t f = vsubq_f32(x, n);
    float32x4_t y = vdupq_n_f32(1.534581243e-04f);
    y = vfmaq_f32(vdupq_n_f32(1.339993207e-03f), y, f);
    y = vfmaq_f32(vdupq_n_f32(9.618489072e-03f), y, f);
    y = vfmaq_f32(vdupq_n_f32(5.550328642e-02f), y, f);
    y = vfmaq_f32(vdupq_n_f32(2.402264625e-01f), y, f);
    y = vfmaq_f32(vdupq_n_f32(6.931471825e-01f), y, f);
    y = vfmaq_f32(vdupq_n_f32(1.0f), y, f);
    const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
    return vmulq_f32(y, vreinterpretq_f32_s32(e));
}

/* qp[dd][r] = Q[row r][dd] · qscale; padding rows zero. Rows are first
 * copied (scaled) into o [R][Dp] — free until the first key tile — and
 * then transposed from there. */
static void pack_q(const fx_attn_plan *p, const fx_attn_task *k, const tile_bufs *b) {
    const int R = b->R, d = b->d, dp = b->dp;
    const float qs = p->qscale;
    for (int r = 0; r < k->rows; r++) {
        float *tr = b->o + (size_t)r * dp;
        const float *q = fx_attn_q_row(p, k, r);
        int e = 0;
        for (; e + 4 <= d; e += 4) vst1q_f32(tr + e, vmulq_n_f32(vld1q_f32(q + e), qs));
        for (; e < d; e++) tr[e] = q[e] * qs;
    }
    for (int dd = 0; dd < d; dd++) {
        float *qd = b->qp + (size_t)dd * R;
        for (int r = 0; r < k->rows; r++) qd[r] = b->o[(size_t)r * dp + dd];
        for (int r = k->rows; r < R; r++) qd[r] = 0.0f;
    }
}

/* Bytes of one kv head's packed K and V. */
static size_t neon_kv_head_bytes(const fx_attn_plan *p) {
    const size_t rows = (size_t)p->nkt * KT, d = (size_t)p->a.d, dp = (d + 15) & ~(size_t)15;
    return up64(rows * d * sizeof(float)) + up64(rows * dp * sizeof(float));
}

/* Key tiles [kb0, kb1) of kv head g → K rows (stride d) and V rows
 * (stride Dp, zero-padded). */
static void neon_pack_kv(const fx_attn_plan *p, int g, int64_t kb0, int64_t kb1, void *dst) {
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
            memcpy(kd, p->a.k + j * p->a.ldk + (int64_t)g * d, sizeof(float) * (size_t)d);
            memcpy(vd, p->a.v + j * p->a.ldv + (int64_t)g * d, sizeof(float) * (size_t)d);
            for (int e = d; e < dp; e++) vd[e] = 0.0f;
        }
    }
}

/* s[jj][r] = Σ_dd kp[jj][dd] · qp[dd][r] for all KT keys and R rows. */
static void scores(const tile_bufs *b) {
    const int R = b->R, d = b->d;
    for (int rb = 0; rb < R; rb += 16) {
        for (int jb = 0; jb < KT; jb += MK) {
            const float *kb = b->kp + (size_t)jb * d;
            const float *qb = b->qp + rb;
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

/* Online softmax over the tile, 4 rows at a time: new max, α, p, l. */
static void softmax_tile(const tile_bufs *b) {
    const int R = b->R;
    const float32x4_t ninf = vdupq_n_f32(-INFINITY), zero = vdupq_n_f32(0.0f);
    for (int rb = 0; rb < R; rb += 4) {
        const float32x4_t mold = vld1q_f32(b->m + rb);
        float32x4_t mx = mold;
        for (int jj = 0; jj < KT; jj++) mx = vmaxq_f32(mx, vld1q_f32(b->s + (size_t)jj * R + rb));
        /* rows that have seen no key keep m = −inf and subtract 0 */
        const float32x4_t use = vbslq_f32(vceqq_f32(mx, ninf), zero, mx);
        const float32x4_t alpha = exp2_ps(vsubq_f32(mold, use));
        float32x4_t sum0 = zero, sum1 = zero;
        for (int jj = 0; jj < KT; jj += 2) {
            float *s0 = b->s + (size_t)jj * R + rb, *s1 = s0 + R;
            const float32x4_t p0 = exp2_ps(vsubq_f32(vld1q_f32(s0), use));
            const float32x4_t p1 = exp2_ps(vsubq_f32(vld1q_f32(s1), use));
            vst1q_f32(s0, p0);
            vst1q_f32(s1, p1);
            sum0 = vaddq_f32(sum0, p0);
            sum1 = vaddq_f32(sum1, p1);
        }
        vst1q_f32(b->m + rb, mx);
        vst1q_f32(b->alpha + rb, alpha);
        vst1q_f32(b->l + rb, vfmaq_f32(vaddq_f32(sum0, sum1), vld1q_f32(b->l + rb), alpha));
    }
}

/* o[rb..rb+3][db..db+16) = α·o + Σ_jj p[jj][r] · vp[jj][db..db+16) */
static void pv_block(const tile_bufs *b, int rb, int db, int first) {
    const int R = b->R, dp = b->dp;
    float32x4_t c[MR][4];
    for (int i = 0; i < MR; i++) {
        const float *orow = b->o + (size_t)(rb + i) * dp + db;
        for (int v = 0; v < 4; v++)
            c[i][v] = first ? vdupq_n_f32(0.0f) : vmulq_n_f32(vld1q_f32(orow + 4 * v), b->alpha[rb + i]);
    }
    for (int jj = 0; jj < KT; jj++) {
        const float *vr = b->vp + (size_t)jj * dp + db;
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
        const float lr = any ? b->l[r] : 0.0f;
        if (!(lr > 0.0f)) {
            memset(out, 0, sizeof(float) * (size_t)d);
            continue;
        }
        const float inv = 1.0f / lr;
        const float *orow = b->o + (size_t)r * b->dp;
        int e = 0;
        for (; e + 4 <= d; e += 4) vst1q_f32(out + e, vmulq_n_f32(vld1q_f32(orow + e), inv));
        for (; e < d; e++) out[e] = orow[e] * inv;
    }
}

static void neon_run_task(const fx_attn_plan *p, int64_t t, void *scratch) {
    const fx_attn_task k = fx_attn_task_of(p, t);
    tile_bufs b;
    carve(p, scratch, &b);
    const float *kv = fx_attn_kv_head(p, k.g);
    const size_t vofs = up64((size_t)p->nkt * KT * b.d * sizeof(float)) / sizeof(float);
    pack_q(p, &k, &b);
    for (int r = 0; r < b.R; r += 4) {
        vst1q_f32(b.m + r, vdupq_n_f32(-INFINITY));
        vst1q_f32(b.l + r, vdupq_n_f32(0.0f));
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

const struct fx_attn_kernels fx_attn_neon = {
    .name = "neon f32 fma",
    .qt = QT,
    .row_align = ROW_ALIGN,
    .kt = KT,
    .scratch_bytes = neon_scratch_bytes,
    .kv_head_bytes = neon_kv_head_bytes,
    .pack_kv = neon_pack_kv,
    .run_task = neon_run_task,
};
