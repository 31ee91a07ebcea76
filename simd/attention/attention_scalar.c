/*
 * attention_scalar.c — the reference attention task in plain C: the same
 * tile walk as the SIMD kernels (see attention.h), written as simple loops
 * with libm's exp2f. Every other ISA is tested against it.
 *
 * Scratch layout (floats), R = rows_pad, kt keys per tile:
 *   qp [d][R]   Q of the task's rows, transposed, times scale·log2(e)
 *   kp [kt][d]  K tile,  vp [kt][d] V tile (rows past sk are zero)
 *   s  [kt][R]  scores, then probabilities 2^(s − m)
 *   o  [R][d]   running, unnormalised output;  m, l, alpha [R]
 */
#include "attention.h"

#include <math.h>
#include <string.h>

enum { SCALAR_QT = 16, SCALAR_KT = 32 };

static size_t scalar_scratch_bytes(const fx_attn_plan *p) {
    size_t R = (size_t)p->rows_pad, d = (size_t)p->a.d, kt = (size_t)p->kt;
    return sizeof(float) * (d * R + 2 * kt * d + kt * R + R * d + 3 * R);
}

static void scalar_run_task(const fx_attn_plan *p, int64_t t, void *scratch) {
    const fx_attn_task k = fx_attn_task_of(p, t);
    const int d = p->a.d, kt = p->kt, R = p->rows_pad;
    float *qp = scratch, *kp = qp + (size_t)d * R, *vp = kp + (size_t)kt * d;
    float *s = vp + (size_t)kt * d, *o = s + (size_t)kt * R, *m = o + (size_t)R * d;
    float *l = m + R, *alpha = l + R;

    for (int r = 0; r < R; r++) {
        const float *q = r < k.rows ? fx_attn_q_row(p, &k, r) : NULL;
        for (int dd = 0; dd < d; dd++) qp[(size_t)dd * R + r] = q ? q[dd] * p->qscale : 0.0f;
        m[r] = -INFINITY;
        l[r] = 0.0f;
    }

    int first = 1;
    for (int64_t kb = 0; kb < p->nkt; kb++) {
        fx_attn_vis vis = fx_attn_tile_vis(p, &k, kb);
        if (vis == FX_ATTN_DONE) break;
        if (vis == FX_ATTN_SKIP) continue;
        const int64_t j0 = kb * kt;
        const int nj = p->a.sk - j0 < kt ? (int)(p->a.sk - j0) : kt;
        for (int jj = 0; jj < kt; jj++) {
            float *kd = kp + (size_t)jj * d, *vd = vp + (size_t)jj * d;
            if (jj < nj) {
                memcpy(kd, p->a.k + (j0 + jj) * p->a.ldk + (int64_t)k.g * d, sizeof(float) * d);
                memcpy(vd, p->a.v + (j0 + jj) * p->a.ldv + (int64_t)k.g * d, sizeof(float) * d);
            } else {
                memset(kd, 0, sizeof(float) * d);
                memset(vd, 0, sizeof(float) * d);
            }
        }

        /* s[jj][r] = Σ_dd K[jj][dd] · Q[r][dd] (log2 domain) */
        for (int jj = 0; jj < kt; jj++) {
            float *sr = s + (size_t)jj * R;
            for (int r = 0; r < R; r++) sr[r] = 0.0f;
            for (int dd = 0; dd < d; dd++) {
                const float kv = kp[(size_t)jj * d + dd];
                const float *qr = qp + (size_t)dd * R;
                for (int r = 0; r < R; r++) sr[r] += kv * qr[r];
            }
        }
        if (vis == FX_ATTN_PARTIAL) fx_attn_mask_tile(p, &k, kb, s, R);

        /* Online softmax: new max, rescale factor, probabilities, sums. */
        for (int r = 0; r < R; r++) {
            float mx = m[r];
            for (int jj = 0; jj < kt; jj++) mx = fmaxf(mx, s[(size_t)jj * R + r]);
            const float use = mx == -INFINITY ? 0.0f : mx; /* no key seen yet */
            alpha[r] = exp2f(m[r] - use);
            m[r] = mx;
            float sum = 0.0f;
            for (int jj = 0; jj < kt; jj++) {
                float *sv = s + (size_t)jj * R + r;
                *sv = exp2f(*sv - use);
                sum += *sv;
            }
            l[r] = l[r] * alpha[r] + sum;
        }

        /* o[r] = alpha[r]·o[r] + Σ_jj p[jj][r] · V[jj] */
        for (int r = 0; r < R; r++) {
            float *orow = o + (size_t)r * d;
            if (first) memset(orow, 0, sizeof(float) * d);
            else
                for (int dd = 0; dd < d; dd++) orow[dd] *= alpha[r];
            for (int jj = 0; jj < kt; jj++) {
                const float pv = s[(size_t)jj * R + r];
                const float *vr = vp + (size_t)jj * d;
                for (int dd = 0; dd < d; dd++) orow[dd] += pv * vr[dd];
            }
        }
        first = 0;
    }

    for (int r = 0; r < k.rows; r++) {
        float *out = fx_attn_o_row(p, &k, r);
        if (l[r] > 0.0f) {
            const float inv = 1.0f / l[r];
            for (int dd = 0; dd < d; dd++) out[dd] = o[(size_t)r * d + dd] * inv;
        } else {
            memset(out, 0, sizeof(float) * d); /* the row sees no key */
        }
    }
}

const struct fx_attn_kernels fx_attn_scalar = {
    .name = "scalar reference",
    .qt = SCALAR_QT,
    .row_align = 1,
    .kt = SCALAR_KT,
    .scratch_bytes = scalar_scratch_bytes,
    .run_task = scalar_run_task,
};
