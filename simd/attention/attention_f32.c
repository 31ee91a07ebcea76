/*
 * attention_f32.c — the layout and packing shared by the attention tables
 * whose products read f32 Q, K and V (scalar, avx2, neon, avx512; see
 * attention.h), in plain C: they only copy, scale by qscale and divide by
 * l (one rounding each, the same on every ISA).
 *
 *   qp [d][R]       Q · qscale transposed: the score kernels load a row
 *                   of Qᵀ (R task rows in vector lanes) per head dim
 *   K tile [kt][d]  keys as stored (the score kernels broadcast elements)
 *   V tile [kt][Dp] values, zero past d (loaded as 16-float vectors)
 *   O [R][Dp]       the running output, row r at o + r·Dp
 * P overwrites S (no pp). Dp = d rounded up to 16.
 *
 * pack_q here serves scalar, avx2 and neon (avx512 transposes in
 * registers); store serves scalar (the SIMD tables vectorise the same
 * products: store_rows in attention_simd.h).
 */
#include "attention.h"

#include <string.h>

fx_attn_layout fx_attn_f32_layout(const fx_attn_plan *p) {
    const size_t R = (size_t)p->rows_pad, d = (size_t)p->a.d, dp = (d + 15) & ~(size_t)15;
    fx_attn_layout l = {
        .q_bytes = sizeof(float) * d * R,
        .p_bytes = 0,
        .k_tile_bytes = sizeof(float) * (size_t)p->kt * d,
        .v_tile_bytes = sizeof(float) * (size_t)p->kt * dp,
    };
    return l;
}

void fx_attn_f32_pack_kv(const fx_attn_plan *p, int g, int64_t kb, void *kdst, void *vdst) {
    const size_t d = (size_t)p->a.d, dp = (d + 15) & ~(size_t)15;
    for (int jj = 0; jj < p->kt; jj++) {
        const int64_t j = kb * p->kt + jj;
        float *kd = (float *)kdst + (size_t)jj * d, *vd = (float *)vdst + (size_t)jj * dp;
        if (j >= p->a.sk) {
            memset(kd, 0, sizeof(float) * d);
            memset(vd, 0, sizeof(float) * dp);
            continue;
        }
        memcpy(kd, p->a.k + j * p->a.ldk + (int64_t)g * p->a.d, sizeof(float) * d);
        memcpy(vd, p->a.v + j * p->a.ldv + (int64_t)g * p->a.d, sizeof(float) * d);
        memset(vd + d, 0, sizeof(float) * (dp - d));
    }
}

/* Eight rows at a time: eight read streams, eight consecutive floats of
 * each qp row written. */
void fx_attn_f32_pack_q(const fx_attn_plan *p, const fx_attn_task *k, const fx_attn_bufs *b) {
    const int R = b->R, d = b->d;
    const float qs = p->qscale;
    float *qp = b->qp;
    for (int r = 0; r < k->rows && r < FX_ATTN_PF_ROWS; r++) fx_attn_prefetch_row(fx_attn_q_row(p, k, r), 4 * d, 0);
    for (int r0 = 0; r0 < R; r0 += 8) {
        const float *q[8];
        const int n = R - r0 < 8 ? R - r0 : 8;
        for (int i = 0; i < n; i++) {
            const int r = r0 + i;
            if (r + FX_ATTN_PF_ROWS < k->rows) fx_attn_prefetch_row(fx_attn_q_row(p, k, r + FX_ATTN_PF_ROWS), 4 * d, 0);
            q[i] = r < k->rows ? fx_attn_q_row(p, k, r) : NULL;
        }
        for (int dd = 0; dd < d; dd++) {
            float *qd = qp + (size_t)dd * R + r0;
            for (int i = 0; i < n; i++) qd[i] = q[i] ? q[i][dd] * qs : 0.0f;
        }
    }
}

void fx_attn_f32_store(const fx_attn_plan *p, const fx_attn_task *k, const fx_attn_bufs *b, int any) {
    const int d = b->d;
    for (int r = 0; r < k->rows; r++) {
        float *out = fx_attn_o_row(p, k, r);
        if (r + FX_ATTN_PF_ROWS < k->rows) fx_attn_prefetch_row(fx_attn_o_row(p, k, r + FX_ATTN_PF_ROWS), 4 * d, 1);
        const float lr = any ? b->l[r] : 0.0f;
        if (!(lr > 0.0f)) { /* the row saw no key */
            memset(out, 0, sizeof(float) * (size_t)d);
            continue;
        }
        const float inv = 1.0f / lr;
        const float *orow = b->o + (size_t)r * (size_t)b->dp;
        for (int e = 0; e < d; e++) out[e] = orow[e] * inv;
    }
}
