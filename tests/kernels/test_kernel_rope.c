/*
 * test_kernel_rope.c — the RoPE table and fx_qk_norm_rope, both layouts,
 * against direct double-precision formulas, on every ISA.
 *
 *  - FLUX: 4 axes of 32 dims, θ = 2000, interleaved pairs, positions
 *    (T, y, x, l) for text (0,0,0,l), image (0,y,x,0) and a reference image
 *    (10,y,x,0); 3 heads of 128.
 *  - Qwen3: one axis of 128, θ = 1e6, half-split pairs, positions 0..S−1;
 *    also a partial rotation (64 of 128 dims) whose tail must stay as is.
 *
 * Tolerances: table cos/sin vs double: 6e-8 absolute (one f32 rounding of
 * a value in [−1, 1]). Rotation vs double: 3e-7·(|x0| + |x1|) per output
 * (f32 cos/sin and two products). Norm + rotation vs double: 2e-6 (floor
 * 1). Across ISAs: rotation alone bitwise equal to scalar (mul, mul,
 * add/sub everywhere); with the norm 4e-6 (f32-lane sums). 1 vs 2 vs 3
 * threads: bitwise.
 */
#include "kernel_isas.h"

typedef struct rope_case {
    const char *name;
    int n_axes, axes[4];
    double theta;
    fx_rope_layout layout;
    int heads, head_dim;
    int64_t seq;
} rope_case;

/* positions [n_axes][seq] for a case */
static int32_t *make_pos(const rope_case *rc) {
    int32_t *pos = calloc((size_t)(rc->n_axes * rc->seq), sizeof *pos);
    if (rc->n_axes == 1) {
        for (int64_t i = 0; i < rc->seq; i++) pos[i] = (int32_t)i;
        return pos;
    }
    if (rc->n_axes != 4) { /* other multi-axis tables: arbitrary small positions */
        for (int a = 0; a < rc->n_axes; a++)
            for (int64_t i = 0; i < rc->seq; i++) pos[a * rc->seq + i] = (int32_t)((i * (a + 3) * 7) % 50);
        return pos;
    }
    /* FLUX: [text, image grid, reference grid] */
    int64_t ntext = rc->seq / 4, side = 1;
    while ((side + 1) * (side + 1) * 2 <= rc->seq - ntext) side++;
    for (int64_t i = 0; i < rc->seq; i++) {
        int64_t T = 0, y = 0, x = 0, l = 0;
        if (i < ntext) l = i;
        else {
            int64_t j = i - ntext, img = j / (side * side), k = j % (side * side);
            T = img ? 10 * img : 0;
            y = k / side, x = k % side;
        }
        pos[0 * rc->seq + i] = (int32_t)T, pos[1 * rc->seq + i] = (int32_t)y;
        pos[2 * rc->seq + i] = (int32_t)x, pos[3 * rc->seq + i] = (int32_t)l;
    }
    return pos;
}

/* double angle of (row, pair) straight from the definition */
static double angle_d(const rope_case *rc, const int32_t *pos, int64_t row, int p) {
    int a = 0, start = 0;
    while (p - start >= rc->axes[a] / 2) start += rc->axes[a] / 2, a++;
    int j = p - start;
    return pos[a * rc->seq + row] * pow(rc->theta, -2.0 * j / rc->axes[a]);
}

static void rope_ref(const rope_case *rc, const int32_t *pos, const float *x, const float *nw,
                     double *out) {
    int rot = 0;
    for (int a = 0; a < rc->n_axes; a++) rot += rc->axes[a];
    int pairs = rot / 2, hd = rc->head_dim;
    for (int64_t r = 0; r < rc->seq; r++)
        for (int h = 0; h < rc->heads; h++) {
            const float *xh = x + (r * rc->heads + h) * hd;
            double *o = out + (r * rc->heads + h) * hd;
            double rr = 1;
            if (nw) {
                double ss = 0;
                for (int d = 0; d < hd; d++) ss += (double)xh[d] * xh[d];
                rr = 1.0 / sqrt(ss / hd + 1e-6);
            }
            for (int d = 0; d < hd; d++) o[d] = xh[d] * rr * (nw ? nw[d] : 1.0);
            for (int p = 0; p < pairs; p++) {
                int i0 = rc->layout == FX_ROPE_INTERLEAVED ? 2 * p : p;
                int i1 = rc->layout == FX_ROPE_INTERLEAVED ? 2 * p + 1 : p + pairs;
                double ang = angle_d(rc, pos, r, p), c = cos(ang), s = sin(ang);
                double a0 = o[i0], a1 = o[i1];
                o[i0] = a0 * c - a1 * s;
                o[i1] = a1 * c + a0 * s;
            }
        }
}

static const rope_case cases[] = {
    {"flux-4axis", 4, {32, 32, 32, 32}, 2000.0, FX_ROPE_INTERLEAVED, 3, 128, KT_SMALL ? 40 : 300},
    {"qwen3-half-split", 1, {128, 0, 0, 0}, 1e6, FX_ROPE_HALF_SPLIT, 4, 128, KT_SMALL ? 33 : 512},
    {"half-split-partial", 1, {64, 0, 0, 0}, 1e4, FX_ROPE_HALF_SPLIT, 2, 128, 17},
    {"interleaved-hd64", 2, {32, 32, 0, 0}, 1e4, FX_ROPE_INTERLEAVED, 5, 64, 33},
    {"interleaved-odd-pairs", 2, {6, 12, 0, 0}, 100.0, FX_ROPE_INTERLEAVED, 3, 18, 7},
};

static void run_case(const rope_case *rc, kt_isas *isas) {
    fx_err err = {0};
    int32_t *pos = make_pos(rc);
    fx_rope_table t;
    REQUIRE_MSG(fx_rope_table_init(&t, pos, rc->seq, rc->n_axes, rc->axes, rc->theta, rc->layout, &err) == FLUX_OK,
                "%s: %s", rc->name, err.msg);
    CHECK(fx_rope_table_check(&t, rc->seq, rc->head_dim, &err) == FLUX_OK);
    int pairs = t.rot_dim / 2;
    /* the table against the definition */
    double worst = 0;
    for (int64_t r = 0; r < rc->seq; r++)
        for (int p = 0; p < pairs; p++) {
            double a = angle_d(rc, pos, r, p);
            double e = fmax(fabs(t.cos[r * pairs + p] - cos(a)), fabs(t.sin[r * pairs + p] - sin(a)));
            if (e > worst) worst = e;
        }
    CHECK_MSG(worst <= 6e-8, "%s: table vs double %.3g", rc->name, worst);

    size_t n = (size_t)(rc->seq * rc->heads * rc->head_dim);
    float *x = kt_alloc(n), *nw = kt_alloc((size_t)rc->head_dim);
    fx_test_rng rng;
    fx_test_rng_seed(&rng, 99);
    for (size_t i = 0; i < n; i++) x[i] = 2.0f * fx_test_rng_normal(&rng);
    for (int d = 0; d < rc->head_dim; d++) nw[d] = 1.0f + 0.5f * fx_test_rng_uniform(&rng);
    double *ref = malloc(n * sizeof(double));
    float *sc[2]; /* scalar results: [0] rope only, [1] norm + rope */
    for (int norm = 0; norm < 2; norm++) {
        rope_ref(rc, pos, x, norm ? nw : NULL, ref);
        sc[norm] = kt_alloc(n);
        memcpy(sc[norm], x, n * sizeof(float));
        fx_kctx kc = kt_ctx(kt_scalar(), 1);
        fx_qk_norm_rope(&kc, sc[norm], rc->heads * rc->head_dim, rc->seq, rc->heads, rc->head_dim,
                        norm ? nw : NULL, 1e-6f, &t);
        kt_ctx_free(&kc);
        double w = 0;
        for (size_t i = 0; i < n; i++) {
            double e;
            if (norm) e = fabs(sc[norm][i] - ref[i]) / (fabs(ref[i]) + 1.0) / 2e-6;
            else {
                size_t d = i % (size_t)rc->head_dim, base = i - d;
                int p = rc->layout == FX_ROPE_INTERLEAVED ? (int)d / 2 : (int)d % pairs;
                int i0 = rc->layout == FX_ROPE_INTERLEAVED ? 2 * p : p, i1 = rc->layout == FX_ROPE_INTERLEAVED ? 2 * p + 1 : p + pairs;
                if ((int)d >= 2 * pairs) { /* not rotated: untouched */
                    e = sc[norm][i] == x[i] ? 0 : INFINITY;
                } else {
                    e = fabs(sc[norm][i] - ref[i]) / (3e-7 * (fabs(x[base + i0]) + fabs(x[base + i1])) + 1e-30);
                }
            }
            if (e > w) w = e;
        }
        CHECK_MSG(w <= 1.0, "%s%s: scalar vs double at %.3g x tolerance", rc->name, norm ? "+norm" : "", w);
    }
    for (int ii = 0; ii < isas->n; ii++) {
        for (int norm = 0; norm < 2; norm++) {
            float *first = NULL;
            for (int th = 1; th <= 3; th++) {
                float *y = kt_alloc(n);
                memcpy(y, x, n * sizeof(float));
                fx_kctx kc = kt_ctx(isas->k[ii], th);
                fx_qk_norm_rope(&kc, y, rc->heads * rc->head_dim, rc->seq, rc->heads, rc->head_dim,
                                norm ? nw : NULL, 1e-6f, &t);
                kt_ctx_free(&kc);
                if (norm) {
                    double e = kt_rel_elem(y, sc[1], n, 1.0);
                    CHECK_MSG(e <= 4e-6, "%s+norm/%s: vs scalar %.3g", rc->name, kt_name(isas->k[ii]), e);
                } else {
                    long at = kt_bitdiff(y, sc[0], n, 4);
                    CHECK_MSG(at < 0, "%s/%s: rotation differs from scalar at %ld", rc->name, kt_name(isas->k[ii]), at);
                }
                if (!first) first = y;
                else {
                    CHECK_MSG(kt_bitdiff(y, first, n, 4) < 0, "%s/%s: %d threads differ", rc->name,
                              kt_name(isas->k[ii]), th);
                    free(y);
                }
            }
            free(first);
        }
    }
    free(sc[0]), free(sc[1]), free(ref), free(x), free(nw), free(pos);
    fx_rope_table_free(&t);
    CHECK(t.cos == NULL && t.sin == NULL);
}

TEST(kernel_rope_flux_4axis) {
    kt_isas isas = kt_isas_list("rope-flux", 0);
    run_case(&cases[0], &isas);
    run_case(&cases[3], &isas);
    run_case(&cases[4], &isas);
}

TEST(kernel_rope_qwen3_half_split) {
    kt_isas isas = kt_isas_list("rope-qwen3", 0);
    run_case(&cases[1], &isas);
    run_case(&cases[2], &isas);
}

/* QK norm without a table: plain per-head RMSNorm. */
TEST(kernel_rope_norm_only) {
    kt_isas isas = kt_isas_list("qk-norm", 0);
    const int64_t rows = 17;
    const int heads = 3, hd = 128;
    size_t n = (size_t)rows * heads * hd;
    float *x = kt_alloc(n), *w = kt_alloc(hd), *y = kt_alloc(n);
    fx_test_rng r;
    fx_test_rng_seed(&r, 3);
    fx_test_fill_uniform(&r, x, n, 4.0f);
    fx_test_fill_uniform(&r, w, hd, 1.0f);
    for (int ii = 0; ii < isas.n; ii++) {
        memcpy(y, x, n * sizeof(float));
        fx_kctx kc = kt_ctx(isas.k[ii], 2);
        fx_qk_norm_rope(&kc, y, heads * hd, rows, heads, hd, w, 1e-6f, NULL);
        double worst = 0;
        for (int64_t i = 0; i < rows * heads; i++) {
            double ss = 0;
            for (int d = 0; d < hd; d++) ss += (double)x[i * hd + d] * x[i * hd + d];
            double rr = 1.0 / sqrt(ss / hd + 1e-6);
            for (int d = 0; d < hd; d++) {
                double want = x[i * hd + d] * rr * w[d];
                double e = fabs(y[i * hd + d] - want) / (fabs(want) + 1.0);
                if (e > worst) worst = e;
            }
        }
        CHECK_MSG(worst <= 4e-6, "qk norm/%s vs double %.3g", kt_name(isas.k[ii]), worst);
        /* no norm and no rope: untouched */
        memcpy(y, x, n * sizeof(float));
        fx_qk_norm_rope(&kc, y, heads * hd, rows, heads, hd, NULL, 1e-6f, NULL);
        CHECK(kt_bitdiff(y, x, n, 4) < 0);
        kt_ctx_free(&kc);
    }
    free(x), free(w), free(y);
}

static int err_has(const fx_err *e, const char *s) { return e->code == FLUX_ERR_INVALID_ARG && strstr(e->msg, s); }

TEST(kernel_rope_validation) {
    fx_rope_table t;
    fx_err e = {0};
    int32_t pos[4 * 8] = {0};
    int dims[4] = {32, 32, 32, 32};
    CHECK(fx_rope_table_init(&t, NULL, 8, 4, dims, 2000, FX_ROPE_INTERLEAVED, &e) == FLUX_ERR_INVALID_ARG);
    CHECK_MSG(err_has(&e, "positions is NULL"), "%s", e.msg);
    CHECK(fx_rope_table_init(&t, pos, 8, 4, NULL, 2000, FX_ROPE_INTERLEAVED, &e) == FLUX_ERR_INVALID_ARG);
    CHECK_MSG(err_has(&e, "axes_dims is NULL"), "%s", e.msg);
    CHECK(fx_rope_table_init(&t, pos, 0, 4, dims, 2000, FX_ROPE_INTERLEAVED, &e) == FLUX_ERR_INVALID_ARG);
    CHECK_MSG(err_has(&e, "seq must be >= 1, got 0"), "%s", e.msg);
    CHECK(fx_rope_table_init(&t, pos, 8, 0, dims, 2000, FX_ROPE_INTERLEAVED, &e) == FLUX_ERR_INVALID_ARG);
    CHECK_MSG(err_has(&e, "n_axes must be in 1..16, got 0"), "%s", e.msg);
    int odd[4] = {32, 31, 32, 33};
    CHECK(fx_rope_table_init(&t, pos, 8, 4, odd, 2000, FX_ROPE_INTERLEAVED, &e) == FLUX_ERR_INVALID_ARG);
    CHECK_MSG(err_has(&e, "axes_dims[1] = 31, each axis needs a positive even number of dims"), "%s", e.msg);
    int zero[2] = {0, 32};
    CHECK(fx_rope_table_init(&t, pos, 8, 2, zero, 2000, FX_ROPE_INTERLEAVED, &e) == FLUX_ERR_INVALID_ARG);
    CHECK_MSG(err_has(&e, "axes_dims[0] = 0"), "%s", e.msg);
    CHECK(fx_rope_table_init(&t, pos, 8, 4, dims, 0.0, FX_ROPE_INTERLEAVED, &e) == FLUX_ERR_INVALID_ARG);
    CHECK_MSG(err_has(&e, "theta must be positive and finite, got 0"), "%s", e.msg);
    CHECK(fx_rope_table_init(&t, pos, 8, 4, dims, NAN, FX_ROPE_INTERLEAVED, &e) == FLUX_ERR_INVALID_ARG);
    CHECK(fx_rope_table_init(&t, pos, 8, 4, dims, 2000, (fx_rope_layout)5, &e) == FLUX_ERR_INVALID_ARG);
    CHECK_MSG(err_has(&e, "unknown layout 5"), "%s", e.msg);
    CHECK(t.cos == NULL && t.sin == NULL); /* a failed init leaves nothing to free */
    fx_rope_table_free(&t);

    /* a valid table, then mismatched applications */
    REQUIRE(fx_rope_table_init(&t, pos, 8, 4, dims, 2000, FX_ROPE_INTERLEAVED, &e) == FLUX_OK);
    CHECK_EQ_INT(t.rot_dim, 128);
    CHECK_EQ_INT(t.seq, 8);
    CHECK(fx_rope_table_check(&t, 8, 128, &e) == FLUX_OK);
    CHECK(fx_rope_table_check(&t, 8, 64, &e) == FLUX_ERR_INVALID_ARG);
    CHECK_MSG(err_has(&e, "table rotates 128 dims but head_dim is 64"), "%s", e.msg);
    CHECK(fx_rope_table_check(&t, 9, 128, &e) == FLUX_ERR_INVALID_ARG);
    CHECK_MSG(err_has(&e, "9 rows but the table has 8 positions"), "%s", e.msg);
    CHECK(fx_rope_table_check(&t, 8, 127, &e) == FLUX_ERR_INVALID_ARG);
    CHECK_MSG(err_has(&e, "head_dim must be even and >= 2, got 127"), "%s", e.msg);
    /* out of contract: clamped, never overruns (ASan build checks this) */
    float *x = kt_alloc(16 * 64);
    for (int i = 0; i < 16 * 64; i++) x[i] = 1.0f;
    fx_kctx kc = kt_ctx(kt_scalar(), 1);
    fx_qk_norm_rope(&kc, x, 64, 16, 1, 64, NULL, 1e-6f, &t);
    for (int i = 8 * 64; i < 16 * 64; i++) CHECK_MSG(x[i] == 1.0f, "row beyond the table touched at %d", i);
    kt_ctx_free(&kc);
    free(x);
    fx_rope_table_free(&t);
    fx_rope_table_free(&t); /* idempotent */
    fx_rope_table_free(NULL);
}

/* A view of rows [r0, seq) rotates a slice exactly like the full table does. */
TEST(kernel_rope_table_view) {
    const rope_case *rc = &cases[0];
    int32_t *pos = make_pos(rc);
    fx_rope_table t;
    fx_err e = {0};
    REQUIRE(fx_rope_table_init(&t, pos, rc->seq, rc->n_axes, rc->axes, rc->theta, rc->layout, &e) == FLUX_OK);
    const int64_t r0 = rc->seq / 3, ld = (int64_t)rc->heads * rc->head_dim;
    size_t n = (size_t)(rc->seq * ld);
    float *full = kt_alloc(n), *part = kt_alloc(n);
    fx_test_rng r;
    fx_test_rng_seed(&r, 4);
    fx_test_fill_uniform(&r, full, n, 1.0f);
    memcpy(part, full, n * sizeof(float));
    fx_kctx kc = kt_ctx(fx_kernels_get(fx_isa_detect(), 0), 2);
    fx_qk_norm_rope(&kc, full, ld, rc->seq, rc->heads, rc->head_dim, NULL, 1e-6f, &t);
    fx_rope_table view = t;
    view.cos += r0 * (t.rot_dim / 2), view.sin += r0 * (t.rot_dim / 2), view.seq -= r0;
    CHECK(fx_rope_table_check(&view, rc->seq - r0, rc->head_dim, &e) == FLUX_OK);
    fx_qk_norm_rope(&kc, part + r0 * ld, ld, rc->seq - r0, rc->heads, rc->head_dim, NULL, 1e-6f, &view);
    CHECK(kt_bitdiff(part + r0 * ld, full + r0 * ld, n - (size_t)(r0 * ld), 4) < 0);
    kt_ctx_free(&kc);
    free(full), free(part), free(pos);
    fx_rope_table_free(&t);
}
