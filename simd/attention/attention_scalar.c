/*
 * attention_scalar.c — the reference attention hooks in plain C: the same
 * tile walk as every ISA (the driver in attention.c), the f32 layout and
 * packing of attention_f32.c, the products as simple loops and the
 * softmax with libm's exp2f. Every other ISA is tested against it.
 *
 *   s [kt][R]   scores, then probabilities 2^(s − m)
 *   o [R][Dp]   running, unnormalised output;  m, l, alpha [R]
 */
#include "attention.h"

#include <math.h>
#include <string.h>

enum { SCALAR_QT = 16, SCALAR_KT = 32 };

/* s[jj][r] = Σ_dd K[jj][dd] · Q[r][dd] (log2 domain) */
static void scalar_scores(const fx_attn_bufs *b) {
    const int d = b->d, kt = b->kt, R = b->R;
    const float *qp = b->qp, *kp = b->kp;
    for (int jj = 0; jj < kt; jj++) {
        float *sr = b->s + (size_t)jj * R;
        for (int r = 0; r < R; r++) sr[r] = 0.0f;
        for (int dd = 0; dd < d; dd++) {
            const float kv = kp[(size_t)jj * d + dd];
            const float *qr = qp + (size_t)dd * R;
            for (int r = 0; r < R; r++) sr[r] += kv * qr[r];
        }
    }
}

/* Online softmax: new max, rescale factor, probabilities, sums. */
static void scalar_softmax(const fx_attn_bufs *b) {
    const int kt = b->kt, R = b->R;
    float *s = b->s;
    for (int r = 0; r < R; r++) {
        float mx = b->m[r];
        for (int jj = 0; jj < kt; jj++) mx = fmaxf(mx, s[(size_t)jj * R + r]);
        const float use = mx == -INFINITY ? 0.0f : mx; /* no key seen yet */
        b->alpha[r] = exp2f(b->m[r] - use);
        b->m[r] = mx;
        float sum = 0.0f;
        for (int jj = 0; jj < kt; jj++) {
            float *sv = s + (size_t)jj * R + r;
            *sv = exp2f(*sv - use);
            sum += *sv;
        }
        b->l[r] = b->l[r] * b->alpha[r] + sum;
    }
}

/* o[r] = alpha[r]·o[r] + Σ_jj p[jj][r] · V[jj] */
static void scalar_pv(const fx_attn_bufs *b, int first) {
    const int d = b->d, dp = b->dp, kt = b->kt, R = b->R;
    const float *vp = b->vp;
    for (int r = 0; r < R; r++) {
        float *orow = b->o + (size_t)r * dp;
        if (first) memset(orow, 0, sizeof(float) * d);
        else
            for (int dd = 0; dd < d; dd++) orow[dd] *= b->alpha[r];
        for (int jj = 0; jj < kt; jj++) {
            const float pv = b->s[(size_t)jj * R + r];
            const float *vr = vp + (size_t)jj * dp;
            for (int dd = 0; dd < d; dd++) orow[dd] += pv * vr[dd];
        }
    }
}

const struct fx_attn_kernels fx_attn_scalar = {
    .name = "scalar reference",
    .qt = SCALAR_QT,
    .row_align = 1,
    .kt = SCALAR_KT,
    .layout = fx_attn_f32_layout,
    .pack_kv = fx_attn_f32_pack_kv,
    .pack_q = fx_attn_f32_pack_q,
    .scores = scalar_scores,
    .softmax = scalar_softmax,
    .pv = scalar_pv,
    .store = fx_attn_f32_store,
};
