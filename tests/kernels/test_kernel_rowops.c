/*
 * test_kernel_rowops.c — row and elementwise kernels (RMSNorm, LayerNorm +
 * modulation, SiLU, SwiGLU, gated add, softmax, GroupNorm, the vector exp)
 * on every ISA this machine runs.
 *
 * Each op is checked three ways:
 *  1. the scalar reference against a direct double-precision formula;
 *  2. every ISA against the scalar reference;
 *  3. 1 vs 2 vs 3 threads, bitwise, on every ISA (shapes large enough to
 *     actually split), plus the ld padding of outputs left untouched.
 *
 * Tolerances (per element: |a − b| / (|b| + floor)):
 *  - RMSNorm, LayerNorm+modulate: scalar vs double 1e-6; ISA vs scalar 4e-6
 *    (SIMD sums in f32 lanes vs double; the 1/sqrt is rounded once),
 *    floor 1 (outputs are O(1); near-zero outputs come from cancellation).
 *  - SiLU, SwiGLU: scalar vs double 4e-7; ISA vs scalar 1e-6 (vector exp
 *    <= 2 ulp plus one division), floor 1e-30 (SiLU goes to 0 smoothly).
 *  - softmax: scalar vs double 8e-6 (the f32 x − max is rounded: an
 *    absolute argument error of 6e-8·|x − max| for scores 60 apart);
 *    ISA vs scalar 4e-6, floor 1e-30.
 *  - gated add: bitwise equal on every ISA (mul then add, no FMA); vs double
 *    2 roundings, 2.4e-7 with floor 1.
 *  - GroupNorm statistics: bitwise equal on every ISA (double channel sums
 *    in pixel order); vs a two-pass double reference: mean and rstd 1e-6.
 *    Apply without SiLU: bitwise (sub, mul, add, no FMA); with SiLU 1e-6;
 *    vs the double formula 2e-6, floor 1.
 *  - exp: <= 2 ulp against exp() in double over [-103, 88.72], exact
 *    special values (exp(0) = 1, exp(-inf) = 0, exp(+inf) = inf, NaN).
 */
#include "kernel_isas.h"

#include "simd/rowops/rowops.h"

typedef struct shape {
    int64_t rows, cols, ld;
} shape;

#if KT_SMALL
static const shape shapes[] = {
    {1, 1, 1}, {7, 7, 9}, {17, 17, 17}, {3, 33, 40}, {2, 255, 255}, {2, 128, 128},
    {40, 513, 520}, /* >= FX_ROW_PARALLEL_MIN: threads really split */
};
#else
static const shape shapes[] = {
    {1, 1, 1},     {7, 7, 9},     {17, 17, 17},   {33, 33, 40},   {255, 255, 255},
    {1, 3072, 3072}, {7, 64, 64}, {33, 128, 131}, {17, 255, 300}, {255, 3072, 3080},
    {100, 2560, 2560},
};
#endif
#define NSHAPES ((int)(sizeof shapes / sizeof shapes[0]))

#define SENTINEL 777.0f

/* Per-op inputs: x [rows, ld] and per-column parameters. */
typedef struct inputs {
    const shape *s;
    float *x, *x2; /* second row-major operand (up / x of gated add) */
    float *w, *shift, *scale;
} inputs;

typedef void (*op_fn)(const fx_kctx *kc, const inputs *in, float *out);
typedef void (*ref_fn)(const inputs *in, double *out);

static void make_inputs(inputs *in, const shape *s, uint64_t seed, float xscale) {
    fx_test_rng r;
    fx_test_rng_seed(&r, seed);
    size_t n = (size_t)(s->rows * s->ld);
    in->s = s;
    in->x = kt_alloc(n);
    in->x2 = kt_alloc(n);
    in->w = kt_alloc((size_t)s->cols);
    in->shift = kt_alloc((size_t)s->cols);
    in->scale = kt_alloc((size_t)s->cols);
    for (size_t i = 0; i < n; i++) {
        in->x[i] = xscale * fx_test_rng_normal(&r) + 0.1f * xscale;
        in->x2[i] = fx_test_rng_normal(&r);
    }
    for (int64_t c = 0; c < s->cols; c++) {
        in->w[c] = 1.0f + 0.5f * fx_test_rng_uniform(&r);
        in->shift[c] = 0.5f * fx_test_rng_uniform(&r);
        in->scale[c] = 0.5f * fx_test_rng_uniform(&r);
    }
}

static void free_inputs(inputs *in) {
    free(in->x), free(in->x2), free(in->w), free(in->shift), free(in->scale);
}

/* Output buffer [rows, ld], padding set to SENTINEL, valid part = x so that
 * in-place ops start from their input. */
static float *fresh_out(const inputs *in) {
    const shape *s = in->s;
    float *o = kt_alloc((size_t)(s->rows * s->ld));
    for (int64_t r = 0; r < s->rows; r++)
        for (int64_t c = 0; c < s->ld; c++)
            o[r * s->ld + c] = c < s->cols ? in->x[r * s->ld + c] : SENTINEL;
    return o;
}

static void compact(const shape *s, const float *src, float *dst) {
    for (int64_t r = 0; r < s->rows; r++)
        memcpy(dst + r * s->cols, src + r * s->ld, sizeof(float) * (size_t)s->cols);
}

static int padding_intact(const shape *s, const float *o) {
    for (int64_t r = 0; r < s->rows; r++)
        for (int64_t c = s->cols; c < s->ld; c++)
            if (o[r * s->ld + c] != SENTINEL) return 0;
    return 1;
}

/* The three checks above for one op over every shape and ISA.
 * tol_isa < 0 means "bitwise equal to scalar". */
static void run_op(const char *name, op_fn op, ref_fn ref, float xscale, double tol_ref,
                   double tol_isa, double floor) {
    kt_isas isas = kt_isas_list(name, 0);
    double worst_ref = 0, worst_isa = 0;
    for (int si = 0; si < NSHAPES; si++) {
        const shape *s = &shapes[si];
        size_t n = (size_t)(s->rows * s->cols);
        inputs in;
        make_inputs(&in, s, 1000 + (uint64_t)si, xscale);

        fx_kctx kc = kt_ctx(kt_scalar(), 1);
        float *sc = fresh_out(&in);
        op(&kc, &in, sc);
        kt_ctx_free(&kc);
        CHECK_MSG(padding_intact(s, sc), "%s: scalar wrote into ld padding (%lldx%lld)", name,
                  (long long)s->rows, (long long)s->cols);
        float *scc = kt_alloc(n);
        compact(s, sc, scc);
        if (ref) {
            double *d = malloc(sizeof(double) * (n ? n : 1));
            ref(&in, d);
            double e = kt_rel_elem_d(scc, d, n, floor);
            if (e > worst_ref) worst_ref = e;
            CHECK_MSG(e <= tol_ref, "%s: scalar vs double %.3g > %.3g at %lldx%lld", name, e, tol_ref,
                      (long long)s->rows, (long long)s->cols);
            free(d);
        }
        for (int ii = 0; ii < isas.n; ii++) {
            float *outs[3];
            for (int t = 0; t < 3; t++) {
                fx_kctx k = kt_ctx(isas.k[ii], t + 1);
                outs[t] = fresh_out(&in);
                op(&k, &in, outs[t]);
                kt_ctx_free(&k);
            }
            float *c1 = kt_alloc(n);
            compact(s, outs[0], c1);
            if (tol_isa < 0) {
                long at = kt_bitdiff(c1, scc, n, sizeof(float));
                CHECK_MSG(at < 0, "%s/%s: differs from scalar at %ld (%.9g vs %.9g), %lldx%lld", name,
                          kt_name(isas.k[ii]), at, at < 0 ? 0.0 : c1[at], at < 0 ? 0.0 : scc[at],
                          (long long)s->rows, (long long)s->cols);
            } else {
                double e = kt_rel_elem(c1, scc, n, floor);
                if (e > worst_isa) worst_isa = e;
                CHECK_MSG(e <= tol_isa, "%s/%s: vs scalar %.3g > %.3g at %lldx%lld", name,
                          kt_name(isas.k[ii]), e, tol_isa, (long long)s->rows, (long long)s->cols);
            }
            for (int t = 1; t < 3; t++) {
                long at = kt_bitdiff(outs[t], outs[0], (size_t)(s->rows * s->ld), sizeof(float));
                CHECK_MSG(at < 0, "%s/%s: %d threads differ from 1 thread at %ld (%lldx%lld)", name,
                          kt_name(isas.k[ii]), t + 1, at, (long long)s->rows, (long long)s->cols);
            }
            CHECK_MSG(padding_intact(s, outs[0]), "%s/%s: wrote into ld padding", name,
                      kt_name(isas.k[ii]));
            for (int t = 0; t < 3; t++) free(outs[t]);
            free(c1);
        }
        free(sc), free(scc);
        free_inputs(&in);
    }
    printf("    %s: worst scalar-vs-double %.2g, worst isa-vs-scalar %.2g\n", name, worst_ref, worst_isa);
}

/* ---- RMSNorm ---------------------------------------------------------- */

static int g_use_w = 1; /* second pass: w = NULL */

static void op_rmsnorm(const fx_kctx *kc, const inputs *in, float *out) {
    const shape *s = in->s; /* in place on out (which starts as x) */
    fx_rmsnorm(kc, s->rows, s->cols, out, s->ld, g_use_w ? in->w : NULL, 1e-6f, out, s->ld);
}
static void ref_rmsnorm(const inputs *in, double *d) {
    const shape *s = in->s;
    for (int64_t r = 0; r < s->rows; r++) {
        const float *x = in->x + r * s->ld;
        double ss = 0;
        for (int64_t c = 0; c < s->cols; c++) ss += (double)x[c] * x[c];
        double rr = 1.0 / sqrt(ss / s->cols + 1e-6);
        for (int64_t c = 0; c < s->cols; c++)
            d[r * s->cols + c] = x[c] * rr * (g_use_w ? in->w[c] : 1.0);
    }
}

TEST(kernel_rowops_rmsnorm) {
    g_use_w = 1;
    run_op("rmsnorm", op_rmsnorm, ref_rmsnorm, 3.0f, 1e-6, 4e-6, 1.0);
    g_use_w = 0;
    run_op("rmsnorm(w=NULL)", op_rmsnorm, ref_rmsnorm, 0.01f, 1e-6, 4e-6, 1.0);
}

/* out-of-place with a different output ld is covered by LayerNorm below. */

/* ---- LayerNorm + modulation -------------------------------------------- */

static void op_layernorm(const fx_kctx *kc, const inputs *in, float *out) {
    const shape *s = in->s;
    fx_layernorm_modulate(kc, s->rows, s->cols, in->x, s->ld, in->shift, in->scale, 1e-6f, out, s->ld);
}
static void ref_layernorm(const inputs *in, double *d) {
    const shape *s = in->s;
    for (int64_t r = 0; r < s->rows; r++) {
        const float *x = in->x + r * s->ld;
        double m = 0, v = 0;
        for (int64_t c = 0; c < s->cols; c++) m += x[c];
        m /= s->cols;
        for (int64_t c = 0; c < s->cols; c++) v += (x[c] - m) * (x[c] - m);
        double rr = 1.0 / sqrt(v / s->cols + 1e-6);
        for (int64_t c = 0; c < s->cols; c++)
            d[r * s->cols + c] = (x[c] - m) * rr * (1.0 + in->scale[c]) + in->shift[c];
    }
}

TEST(kernel_rowops_layernorm_modulate) {
    /* offset 0.1·scale in the data: a non-zero mean that two-pass handles */
    run_op("layernorm_modulate", op_layernorm, ref_layernorm, 5.0f, 1e-6, 4e-6, 1.0);
}

/* ---- SiLU / SwiGLU ----------------------------------------------------- */

static double silu_d(double v) { return v / (1.0 + exp(-v)); }

static void op_silu(const fx_kctx *kc, const inputs *in, float *out) {
    const shape *s = in->s; /* fx_silu is over n contiguous floats: rows of ld */
    float *tmp = kt_alloc((size_t)(s->rows * s->cols));
    compact(s, out, tmp);
    fx_silu(kc, s->rows * s->cols, tmp);
    for (int64_t r = 0; r < s->rows; r++)
        memcpy(out + r * s->ld, tmp + r * s->cols, sizeof(float) * (size_t)s->cols);
    free(tmp);
}
static void ref_silu(const inputs *in, double *d) {
    const shape *s = in->s;
    for (int64_t r = 0; r < s->rows; r++)
        for (int64_t c = 0; c < s->cols; c++) d[r * s->cols + c] = silu_d(in->x[r * s->ld + c]);
}

TEST(kernel_rowops_silu) {
    run_op("silu", op_silu, ref_silu, 8.0f, 4e-7, 1e-6, 1e-30);
    /* far tails: silu(-200) = -0 (no NaN from exp overflow), silu(200) = 200 */
    kt_isas isas = kt_isas_list("silu-tails", 0);
    for (int ii = 0; ii < isas.n; ii++) {
        fx_kctx kc = kt_ctx(isas.k[ii], 1);
        float v[6] = {-200.0f, 200.0f, -88.0f, 89.0f, 0.0f, -1e-30f};
        fx_silu(&kc, 6, v);
        CHECK_MSG(v[0] == 0.0f && v[1] == 200.0f && fabsf(v[2]) < 1e-36f && v[3] == 89.0f &&
                      v[4] == 0.0f && !isnan(v[5]),
                  "silu tails on %s: %g %g %g %g %g %g", kt_name(isas.k[ii]), v[0], v[1], v[2], v[3],
                  v[4], v[5]);
        kt_ctx_free(&kc);
    }
}

static int g_alias = 0; /* 1: out aliases gate */

static void op_swiglu(const fx_kctx *kc, const inputs *in, float *out) {
    const shape *s = in->s;
    if (g_alias) /* out starts as x = gate */
        fx_swiglu(kc, s->rows, s->cols, out, s->ld, in->x2, s->ld, out, s->ld);
    else
        fx_swiglu(kc, s->rows, s->cols, in->x, s->ld, in->x2, s->ld, out, s->ld);
}
static void ref_swiglu(const inputs *in, double *d) {
    const shape *s = in->s;
    for (int64_t r = 0; r < s->rows; r++)
        for (int64_t c = 0; c < s->cols; c++)
            d[r * s->cols + c] = silu_d(in->x[r * s->ld + c]) * in->x2[r * s->ld + c];
}

TEST(kernel_rowops_swiglu) {
    g_alias = 0;
    run_op("swiglu", op_swiglu, ref_swiglu, 6.0f, 6e-7, 1e-6, 1e-30);
    g_alias = 1;
    run_op("swiglu(out=gate)", op_swiglu, ref_swiglu, 6.0f, 6e-7, 1e-6, 1e-30);
}

/* ---- gated add ---------------------------------------------------------- */

static int g_gate = 1;

static void op_gated_add(const fx_kctx *kc, const inputs *in, float *out) {
    const shape *s = in->s; /* y = out (starts as x) += gate ⊙ x2 */
    fx_gated_add(kc, s->rows, s->cols, out, s->ld, g_gate ? in->scale : NULL, in->x2, s->ld);
}
static void ref_gated_add(const inputs *in, double *d) {
    const shape *s = in->s;
    for (int64_t r = 0; r < s->rows; r++)
        for (int64_t c = 0; c < s->cols; c++)
            d[r * s->cols + c] = (double)in->x[r * s->ld + c] +
                                 (g_gate ? (double)in->scale[c] : 1.0) * in->x2[r * s->ld + c];
}

TEST(kernel_rowops_gated_add) {
    g_gate = 1;
    run_op("gated_add", op_gated_add, ref_gated_add, 1.0f, 2.4e-7, -1, 1.0);
    g_gate = 0;
    run_op("gated_add(gate=NULL)", op_gated_add, ref_gated_add, 1.0f, 1.2e-7, -1, 1.0);
}

/* ---- softmax -------------------------------------------------------------- */

static void op_softmax(const fx_kctx *kc, const inputs *in, float *out) {
    const shape *s = in->s;
    fx_softmax_rows(kc, s->rows, s->cols, out, s->ld);
}
static void ref_softmax(const inputs *in, double *d) {
    const shape *s = in->s;
    for (int64_t r = 0; r < s->rows; r++) {
        const float *x = in->x + r * s->ld;
        double mx = -INFINITY, sum = 0;
        for (int64_t c = 0; c < s->cols; c++) mx = x[c] > mx ? x[c] : mx;
        for (int64_t c = 0; c < s->cols; c++) sum += exp(x[c] - mx);
        for (int64_t c = 0; c < s->cols; c++) d[r * s->cols + c] = exp(x[c] - mx) / sum;
    }
}

TEST(kernel_rowops_softmax) {
    run_op("softmax", op_softmax, ref_softmax, 4.0f, 8e-6, 4e-6, 1e-30);
    /* scores spread over 60 units: many tiny and underflowing terms */
    run_op("softmax(wide)", op_softmax, ref_softmax, 20.0f, 8e-6, 4e-6, 1e-30);
}

/* ---- the vector exp ------------------------------------------------------- */

static double ulp_err(float got, double want) {
    if (want == 0) return got == 0 ? 0 : INFINITY;
    int e;
    frexp(want, &e);                    /* want = m·2^e, m in [0.5, 1) */
    int ue = e - 24 < -149 ? -149 : e - 24; /* ulp of a float near want */
    return fabs((double)got - want) / ldexp(1.0, ue);
}

TEST(kernel_rowops_exp_ulp) {
    kt_isas isas = kt_isas_list("exp", 0);
    const int64_t n = KT_SMALL ? 20000 : 2000000;
    float *x = kt_alloc((size_t)n), *y = kt_alloc((size_t)n);
    for (int64_t i = 0; i < n; i++) x[i] = -103.0f + (float)((88.72 + 103.0) * (double)i / (double)(n - 1));
    for (int ii = 0; ii < isas.n; ii++) {
        fx_kctx kc = kt_ctx(isas.k[ii], 1);
        const struct fx_row_kernels *rk = fx_row_table(&kc);
        rk->exp(n, x, y);
        double worst = 0;
        float at = 0;
        for (int64_t i = 0; i < n; i++) {
            double e = ulp_err(y[i], exp((double)x[i]));
            if (e > worst) worst = e, at = x[i];
        }
        printf("    exp/%s: max error %.3f ulp (at x = %.9g)\n", kt_name(isas.k[ii]), worst, at);
        CHECK_MSG(worst <= 2.0, "exp/%s: %.3f ulp at %.9g", kt_name(isas.k[ii]), worst, at);
        float sp[6] = {0.0f, -INFINITY, INFINITY, NAN, 89.0f, -110.0f}, so[6];
        rk->exp(6, sp, so);
        CHECK_MSG(so[0] == 1.0f && so[1] == 0.0f && isinf(so[2]) && so[2] > 0 && isnan(so[3]) &&
                      isinf(so[4]) && so[5] == 0.0f,
                  "exp/%s specials: %g %g %g %g %g %g", kt_name(isas.k[ii]), so[0], so[1], so[2], so[3],
                  so[4], so[5]);
        kt_ctx_free(&kc);
    }
    free(x), free(y);
}

/* ---- GroupNorm ----------------------------------------------------------- */

typedef struct gn_case {
    int64_t pixels;
    int channels, groups;
} gn_case;

#if KT_SMALL
static const gn_case gn_cases[] = {{1, 6, 3}, {7, 15, 5}, {17, 32, 32}, {33, 96, 32}, {300, 64, 32}};
#else
static const gn_case gn_cases[] = {
    {1, 6, 3},     {7, 15, 5},      {17, 32, 32},     {33, 96, 32},  {255, 128, 32},
    {4096, 33, 11}, {4097, 128, 32}, {16384, 256, 32}, {900, 512, 32},
};
#endif

TEST(kernel_groupnorm) {
    kt_isas isas = kt_isas_list("groupnorm", 0);
    int ncases = (int)(sizeof gn_cases / sizeof gn_cases[0]);
    for (int ci = 0; ci < ncases; ci++) {
        const gn_case *g = &gn_cases[ci];
        size_t n = (size_t)g->pixels * (size_t)g->channels;
        int cpg = g->channels / g->groups;
        fx_test_rng r;
        fx_test_rng_seed(&r, 77 + (uint64_t)ci);
        float *x = kt_alloc(n), *gamma = kt_alloc((size_t)g->channels), *beta = kt_alloc((size_t)g->channels);
        /* per-group offsets: means far from 0 relative to the spread */
        for (size_t i = 0; i < n; i++) {
            int grp = (int)(i % (size_t)g->channels) / cpg;
            x[i] = 2.0f * fx_test_rng_normal(&r) + (float)(grp % 5) - 2.0f;
        }
        for (int c = 0; c < g->channels; c++) {
            gamma[c] = 1.0f + 0.3f * fx_test_rng_uniform(&r);
            beta[c] = 0.3f * fx_test_rng_uniform(&r);
        }
        /* two-pass double reference statistics */
        double *dm = malloc(sizeof(double) * (size_t)g->groups), *dr = malloc(sizeof(double) * (size_t)g->groups);
        for (int gr = 0; gr < g->groups; gr++) {
            double s = 0, v = 0, cnt = (double)g->pixels * cpg;
            for (int64_t p = 0; p < g->pixels; p++)
                for (int c = gr * cpg; c < (gr + 1) * cpg; c++) s += x[p * g->channels + c];
            dm[gr] = s / cnt;
            for (int64_t p = 0; p < g->pixels; p++)
                for (int c = gr * cpg; c < (gr + 1) * cpg; c++) {
                    double d = x[p * g->channels + c] - dm[gr];
                    v += d * d;
                }
            dr[gr] = 1.0 / sqrt(v / cnt + 1e-6);
        }
        float *m0 = kt_alloc((size_t)g->groups), *r0 = kt_alloc((size_t)g->groups);
        float *ys0 = kt_alloc(n), *ys1 = kt_alloc(n);
        {
            fx_kctx kc = kt_ctx(kt_scalar(), 1);
            fx_groupnorm_stats(&kc, g->pixels, g->channels, g->groups, x, 1e-6f, m0, r0);
            fx_groupnorm(&kc, g->pixels, g->channels, g->groups, x, gamma, beta, 1e-6f, 0, ys0);
            fx_groupnorm(&kc, g->pixels, g->channels, g->groups, x, gamma, beta, 1e-6f, 1, ys1);
            kt_ctx_free(&kc);
        }
        for (int gr = 0; gr < g->groups; gr++) {
            CHECK_MSG(fabs(m0[gr] - dm[gr]) <= 1e-6 * (fabs(dm[gr]) + 1.0 / dr[gr]),
                      "gn mean %d: %.9g vs %.9g (case %d)", gr, m0[gr], dm[gr], ci);
            CHECK_MSG(fabs(r0[gr] - dr[gr]) <= 1e-6 * dr[gr], "gn rstd %d: %.9g vs %.9g (case %d)", gr,
                      r0[gr], dr[gr], ci);
        }
        /* apply vs double formula */
        double worst = 0;
        for (size_t i = 0; i < n; i++) {
            int c = (int)(i % (size_t)g->channels), gr = c / cpg;
            double want = (x[i] - dm[gr]) * dr[gr] * gamma[c] + beta[c];
            double e1 = fabs(ys0[i] - want) / (fabs(want) + 1.0);
            double e2 = fabs(ys1[i] - silu_d(want)) / (fabs(silu_d(want)) + 1.0);
            if (e1 > worst) worst = e1;
            if (e2 > worst) worst = e2;
        }
        CHECK_MSG(worst <= 2e-6, "gn apply vs double: %.3g (case %d)", worst, ci);

        float *first = kt_alloc(n); /* the 1-thread fused result of an ISA */
        for (int ii = 0; ii < isas.n; ii++) {
            const char *nm = kt_name(isas.k[ii]);
            for (int t = 1; t <= 3; t++) {
                fx_kctx kc = kt_ctx(isas.k[ii], t);
                float *m = kt_alloc((size_t)g->groups), *rs = kt_alloc((size_t)g->groups);
                float *y0 = kt_alloc(n), *y1 = kt_alloc(n);
                fx_groupnorm_stats(&kc, g->pixels, g->channels, g->groups, x, 1e-6f, m, rs);
                CHECK_MSG(kt_bitdiff(m, m0, (size_t)g->groups, 4) < 0 &&
                              kt_bitdiff(rs, r0, (size_t)g->groups, 4) < 0,
                          "gn stats %s/%d threads differ from scalar (case %d)", nm, t, ci);
                fx_groupnorm_apply(&kc, g->pixels, g->channels, g->groups, x, m, rs, gamma, beta, 0, y0);
                long at = kt_bitdiff(y0, ys0, n, 4);
                CHECK_MSG(at < 0, "gn apply %s/%d threads differs from scalar at %ld (case %d)", nm, t, at, ci);
                /* fused SiLU, in place */
                memcpy(y1, x, n * sizeof(float));
                fx_groupnorm(&kc, g->pixels, g->channels, g->groups, y1, gamma, beta, 1e-6f, 1, y1);
                double e = kt_rel_elem(y1, ys1, n, 1.0);
                CHECK_MSG(e <= 1e-6, "gn+silu %s/%d threads vs scalar %.3g (case %d)", nm, t, e, ci);
                if (t == 1) {
                    memcpy(first, y1, n * sizeof(float));
                } else {
                    CHECK_MSG(kt_bitdiff(y1, first, n, 4) < 0, "gn+silu %s: %d threads differ from 1 (case %d)",
                              nm, t, ci);
                }
                free(m), free(rs), free(y0), free(y1);
                kt_ctx_free(&kc);
            }
        }
        free(x), free(gamma), free(beta), free(dm), free(dr), free(m0), free(r0), free(ys0), free(ys1);
        free(first);
    }
}
