/*
 * rope.c — rotary position embedding: the cos/sin table and the fused
 * per-head QK-RMSNorm + rotation (kernels.h).
 *
 * One table serves both layouts: FLUX's 4-axis RoPE (interleaved pairs,
 * axes_dims [32,32,32,32], θ = 2000, positions (T, y, x, l)) and Qwen3's
 * 1-D half-split RoPE (one axis of 128, θ = 1e6). Angles are computed in
 * double (as diffusers does) and rounded to f32 once, by this scalar code,
 * so every ISA rotates with the same numbers; the rotation itself is
 * mul, mul, add/sub on every ISA (bit-identical).
 */
#include "simd/rowops/rowops.h"

#include <math.h>
#include <stdlib.h>

#define ROPE_MAX_AXES 16
#define ROPE_MAX_DIM 65536

flux_status fx_rope_table_init(fx_rope_table *t, const int32_t *pos, int64_t seq, int n_axes,
                               const int *axes_dims, double theta, fx_rope_layout layout,
                               fx_err *err) {
    if (!t) return fx_fail(err, FLUX_ERR_INVALID_ARG, "rope: table pointer is NULL");
    t->seq = 0, t->rot_dim = 0, t->layout = layout, t->cos = t->sin = NULL;
    if (!pos || !axes_dims)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "rope: %s is NULL", pos ? "axes_dims" : "positions");
    if (seq < 1)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "rope: seq must be >= 1, got %lld", (long long)seq);
    if (n_axes < 1 || n_axes > ROPE_MAX_AXES)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "rope: n_axes must be in 1..%d, got %d",
                       ROPE_MAX_AXES, n_axes);
    if (layout != FX_ROPE_INTERLEAVED && layout != FX_ROPE_HALF_SPLIT)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "rope: unknown layout %d", (int)layout);
    if (!(theta > 0.0) || !isfinite(theta))
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "rope: theta must be positive and finite, got %g",
                       theta);
    int rot_dim = 0;
    for (int a = 0; a < n_axes; a++) {
        if (axes_dims[a] <= 0 || axes_dims[a] % 2)
            return fx_fail(err, FLUX_ERR_INVALID_ARG,
                           "rope: axes_dims[%d] = %d, each axis needs a positive even number of dims",
                           a, axes_dims[a]);
        if (axes_dims[a] > ROPE_MAX_DIM - rot_dim)
            return fx_fail(err, FLUX_ERR_INVALID_ARG, "rope: axes_dims sum beyond %d dims",
                           ROPE_MAX_DIM);
        rot_dim += axes_dims[a];
    }
    int pairs = rot_dim / 2;
    size_t n = (size_t)seq * (size_t)pairs;
    if (seq > (int64_t)(SIZE_MAX / 2 / sizeof(float)) / pairs)
        return fx_fail(err, FLUX_ERR_NOMEM, "rope: table of %lld x %d pairs is too large",
                       (long long)seq, pairs);
    float *c = malloc(n * sizeof(float)), *s = malloc(n * sizeof(float));
    if (!c || !s) {
        free(c);
        free(s);
        return fx_fail(err, FLUX_ERR_NOMEM, "rope: cannot allocate a %lld x %d table",
                       (long long)seq, pairs);
    }
    /* frequency of each pair: theta^(-2j/axis_dim), j = index in its axis */
    double *freq = malloc((size_t)pairs * sizeof(double));
    int *axis = malloc((size_t)pairs * sizeof(int));
    if (!freq || !axis) {
        free(c), free(s), free(freq), free(axis);
        return fx_fail(err, FLUX_ERR_NOMEM, "rope: cannot allocate %d frequencies", pairs);
    }
    for (int a = 0, p = 0; a < n_axes; a++)
        for (int j = 0; j < axes_dims[a] / 2; j++, p++) {
            freq[p] = 1.0 / pow(theta, (2.0 * j) / axes_dims[a]);
            axis[p] = a;
        }
    for (int64_t r = 0; r < seq; r++)
        for (int p = 0; p < pairs; p++) {
            double angle = (double)pos[(int64_t)axis[p] * seq + r] * freq[p];
            c[r * pairs + p] = (float)cos(angle);
            s[r * pairs + p] = (float)sin(angle);
        }
    free(freq);
    free(axis);
    t->seq = seq, t->rot_dim = rot_dim, t->cos = c, t->sin = s;
    return FLUX_OK;
}

void fx_rope_table_free(fx_rope_table *t) {
    if (!t) return;
    free(t->cos);
    free(t->sin);
    t->cos = t->sin = NULL;
    t->seq = 0, t->rot_dim = 0;
}

flux_status fx_rope_table_check(const fx_rope_table *t, int64_t rows, int head_dim, fx_err *err) {
    if (!t || !t->cos)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "rope: table is not initialised");
    if (head_dim < 2 || head_dim % 2)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "rope: head_dim must be even and >= 2, got %d",
                       head_dim);
    if (t->rot_dim > head_dim)
        return fx_fail(err, FLUX_ERR_INVALID_ARG,
                       "rope: table rotates %d dims but head_dim is %d", t->rot_dim, head_dim);
    if (rows > t->seq)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "rope: %lld rows but the table has %lld positions",
                       (long long)rows, (long long)t->seq);
    return FLUX_OK;
}

/* Scalar reference rotation of one head (row table entry). */
void fx_rope_scalar(float *x, int pairs, fx_rope_layout layout, const float *cos,
                    const float *sin) {
    int stride = layout == FX_ROPE_INTERLEAVED ? 2 : 1;
    int off = layout == FX_ROPE_INTERLEAVED ? 1 : pairs;
    for (int p = 0; p < pairs; p++) {
        float *a = x + (size_t)p * stride, *b = a + off;
        float x0 = *a, x1 = *b, c = cos[p], s = sin[p];
        float x0c = x0 * c, x1s = x1 * s, x1c = x1 * c, x0s = x0 * s;
        *a = x0c - x1s;
        *b = x1c + x0s;
    }
}

void fx_qk_norm_rope(const fx_kctx *kc, float *x, int64_t ldx, int64_t rows, int heads,
                     int head_dim, const float *norm_w, float eps, const fx_rope_table *rope) {
    if (rows <= 0 || heads <= 0 || head_dim <= 0) return;
    if (!norm_w && !rope) return;
    const struct fx_row_kernels *rk = fx_row_table(kc);
    /* Out-of-contract tables (see fx_rope_table_check) are clamped, never overrun. */
    int pairs = 0;
    int64_t rope_rows = 0;
    if (rope && rope->cos) {
        pairs = (rope->rot_dim < head_dim ? rope->rot_dim : head_dim) / 2;
        rope_rows = rows < rope->seq ? rows : rope->seq;
    }
    int threads = kc && kc->threads > 0 ? kc->threads : 1;
    if (rows * heads * head_dim < FX_ROW_PARALLEL_MIN) threads = 1;
    (void)threads; /* unused without OpenMP */
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t r = 0; r < rows; r++) {
        for (int h = 0; h < heads; h++) {
            float *xh = x + r * ldx + (int64_t)h * head_dim;
            if (norm_w) rk->rmsnorm(head_dim, xh, norm_w, eps, xh);
            if (pairs && r < rope_rows) {
                int ppr = rope->rot_dim / 2; /* table row stride */
                rk->rope(xh, pairs, rope->layout, rope->cos + r * ppr, rope->sin + r * ppr);
            }
        }
    }
}
