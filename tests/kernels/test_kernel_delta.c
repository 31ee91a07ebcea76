/*
 * test_kernel_delta.c — fx_linear with additive terms (fx_delta: LoRA
 * low-rank B·A, dense ΔW, LoKr W1 ⊗ W2) on every ISA this machine runs.
 *
 * Each case runs the layer without terms (Y0) and with them (Y1) and checks
 * Y1 − Y0 against a double-precision reference of Σ s·(gate)·ΔW·x on the
 * term's columns (zero elsewhere, bit for bit). Tolerance per element:
 *   |Y1 − Y0 − ref| <= tol·(M + |Y0|)
 * with M = the sum of |products| of the term (|g|·Σ|b·(a·x)| for B·A) and
 * tol = 1e-5 on f32-math tables (a few hundred roundings of 2⁻²⁴ at most),
 * 2e-2 where bf16 weights use bf16 dot products (X and T rounded to bf16).
 * Thread-count invariance is bitwise (1, 2 and 3 threads), and a chain
 * whose terms are all cut off (no terms) is the plain layer bit for bit.
 */
#include "tests/kernels/kernel_isas.h"

#include "simd/gemm/gemm.h"

typedef struct term_spec {
    fx_delta_kind kind;
    fx_dtype dt;                 /* factor dtype */
    int64_t r;                   /* LOWRANK rank; KRON: rank of a factored W2 (0 = whole) */
    int64_t l, m1, k2, n2;       /* KRON factor shapes */
    float scale;
} term_spec;

/* Factor storage of one term over `out` rows of ΔW (row0 = 0), and its
 * dense ΔW [out, k] in double for the reference. */
typedef struct term_data {
    fx_delta full;
    void *a, *b, *c;
    double *dw;
    int64_t out;
} term_data;

static void *random_factor(fx_test_rng *r, fx_dtype dt, int64_t n, float amp) {
    void *p = malloc((size_t)(n ? n : 1) * fx_dtype_size(dt));
    for (int64_t i = 0; i < n; i++) {
        float v = amp * fx_test_rng_uniform(r);
        if (dt == FX_DTYPE_F32) ((float *)p)[i] = v;
        else if (dt == FX_DTYPE_BF16) ((uint16_t *)p)[i] = fx_f32_to_bf16_bits(v);
        else ((uint16_t *)p)[i] = fx_f32_to_f16_bits(v);
    }
    return p;
}

static double factor_at(const void *p, fx_dtype dt, int64_t i) {
    if (dt == FX_DTYPE_F32) return ((const float *)p)[i];
    uint16_t h = ((const uint16_t *)p)[i];
    return dt == FX_DTYPE_BF16 ? fx_bf16_bits_to_f32(h) : fx_f16_bits_to_f32(h);
}

static void make_term(fx_test_rng *rng, const term_spec *s, int64_t out, int64_t k, term_data *t) {
    memset(t, 0, sizeof *t);
    t->out = out;
    t->dw = calloc((size_t)(out * k), sizeof(double));
    fx_delta *d = &t->full;
    d->kind = s->kind;
    d->scale = s->scale;
    d->row0 = 0;
    d->rows = out;
    if (s->kind == FX_DELTA_LOWRANK) {
        t->a = random_factor(rng, s->dt, s->r * k, 0.5f);
        t->b = random_factor(rng, s->dt, out * s->r, 0.5f);
        d->a = (fx_weight){.data = t->a, .dtype = s->dt, .n = s->r, .k = k, .ld = k};
        d->b = (fx_weight){.data = t->b, .dtype = s->dt, .n = out, .k = s->r, .ld = s->r};
        for (int64_t i = 0; i < out; i++)
            for (int64_t j = 0; j < k; j++)
                for (int64_t q = 0; q < s->r; q++)
                    t->dw[i * k + j] += factor_at(t->b, s->dt, i * s->r + q) * factor_at(t->a, s->dt, q * k + j);
    } else if (s->kind == FX_DELTA_DENSE) {
        t->a = random_factor(rng, s->dt, out * k, 0.5f);
        d->a = (fx_weight){.data = t->a, .dtype = s->dt, .n = out, .k = k, .ld = k};
        for (int64_t i = 0; i < out * k; i++) t->dw[i] = factor_at(t->a, s->dt, i);
    } else { /* W1 [l, m1] ⊗ W2 [k2, n2] = [l·k2, m1·n2]; W2 = c [k2, r]·a [r, n2] when r > 0 */
        t->b = random_factor(rng, s->dt, s->l * s->m1, 1.0f);
        d->b = (fx_weight){.data = t->b, .dtype = s->dt, .n = s->l, .k = s->m1, .ld = s->m1};
        double *w2 = calloc((size_t)(s->k2 * s->n2), sizeof *w2);
        if (s->r) {
            t->c = random_factor(rng, s->dt, s->k2 * s->r, 0.5f);
            t->a = random_factor(rng, FX_DTYPE_F32, s->r * s->n2, 0.5f);
            d->c = (fx_weight){.data = t->c, .dtype = s->dt, .n = s->k2, .k = s->r, .ld = s->r};
            d->a = (fx_weight){.data = t->a, .dtype = FX_DTYPE_F32, .n = s->r, .k = s->n2, .ld = s->n2};
            for (int64_t i = 0; i < s->k2; i++)
                for (int64_t j = 0; j < s->n2; j++)
                    for (int64_t q = 0; q < s->r; q++)
                        w2[i * s->n2 + j] += factor_at(t->c, s->dt, i * s->r + q) * factor_at(t->a, FX_DTYPE_F32, q * s->n2 + j);
        } else {
            t->a = random_factor(rng, s->dt, s->k2 * s->n2, 0.5f);
            d->a = (fx_weight){.data = t->a, .dtype = s->dt, .n = s->k2, .k = s->n2, .ld = s->n2};
            for (int64_t i = 0; i < s->k2 * s->n2; i++) w2[i] = factor_at(t->a, s->dt, i);
        }
        for (int64_t i1 = 0; i1 < s->l; i1++)
            for (int64_t i2 = 0; i2 < s->k2; i2++)
                for (int64_t j1 = 0; j1 < s->m1; j1++)
                    for (int64_t j2 = 0; j2 < s->n2; j2++)
                        t->dw[(i1 * s->k2 + i2) * k + j1 * s->n2 + j2] =
                            factor_at(t->b, s->dt, i1 * s->m1 + j1) * w2[i2 * s->n2 + j2];
        free(w2);
    }
}

static void free_term(term_data *t) {
    free(t->a), free(t->b), free(t->c), free(t->dw);
}

/* One layer [n, k] with `nt` terms; each term i covers its ΔW rows
 * [src0[i], src0[i] + rows[i]) at output column dst0[i]. Returns the worst
 * error ratio (error / allowed; <= 1 passes) and fails the test on a
 * bitwise thread-count difference. */
typedef struct layer_case {
    int64_t m, n, k, xpad, ypad;
    fx_epilogue_mode mode;
    int nt;
    term_spec spec[3];
    int64_t out[3], src0[3], rows[3], dst0[3];
} layer_case;

static double run_layer(const fx_kernels *kt, const layer_case *c, uint64_t seed) {
    fx_test_rng rng;
    fx_test_rng_seed(&rng, seed);
    const int64_t m = c->m, n = c->n, k = c->k, ldx = k + c->xpad, ldy = n + c->ypad;
    float *x = kt_alloc((size_t)(m * ldx)), *y0 = kt_alloc((size_t)(m * ldy)), *y1 = kt_alloc((size_t)(m * ldy));
    float *yt = kt_alloc((size_t)(m * ldy)), *yinit = kt_alloc((size_t)(m * ldy));
    float *bias = kt_alloc((size_t)n), *gate = kt_alloc((size_t)n);
    fx_test_fill_uniform(&rng, x, (size_t)(m * ldx), 1.0f);
    fx_test_fill_uniform(&rng, yinit, (size_t)(m * ldy), 2.0f);
    fx_test_fill_uniform(&rng, bias, (size_t)n, 1.0f);
    fx_test_fill_uniform(&rng, gate, (size_t)n, 1.5f);
    void *wbuf = random_factor(&rng, FX_DTYPE_BF16, n * k, 0.3f);
    fx_weight w = {.data = wbuf, .dtype = FX_DTYPE_BF16, .n = n, .k = k, .ld = k};
    term_data td[3];
    fx_delta chain[3];
    for (int i = 0; i < c->nt; i++) {
        make_term(&rng, &c->spec[i], c->out[i], k, &td[i]);
        chain[i] = fx_delta_rows(&td[i].full, c->src0[i], c->rows[i], c->dst0[i]);
        chain[i].next = i + 1 < c->nt ? &chain[i + 1] : NULL;
        char why[160];
        if (fx_delta_check(&chain[i], n, k, why, sizeof why))
            fx_test_fail(__FILE__, __LINE__, "term %d refused: %s", i, why);
    }
    fx_epilogue epi = {c->mode, c->mode == FX_EPI_STORE ? bias : NULL,
                       c->mode == FX_EPI_GATED_ACCUMULATE ? gate : NULL};

    fx_kctx kc = kt_ctx(kt, 2);
    memcpy(y0, yinit, sizeof(float) * (size_t)(m * ldy));
    fx_linear(&kc, m, x, ldx, &w, y0, ldy, &epi);
    fx_weight wd = w;
    wd.delta = &chain[0];
    memcpy(y1, yinit, sizeof(float) * (size_t)(m * ldy));
    fx_linear(&kc, m, x, ldx, &wd, y1, ldy, &epi);
    kt_ctx_free(&kc);
    for (int threads = 1; threads <= 3; threads += 2) {
        fx_kctx kt1 = kt_ctx(kt, threads);
        memcpy(yt, yinit, sizeof(float) * (size_t)(m * ldy));
        fx_linear(&kt1, m, x, ldx, &wd, yt, ldy, &epi);
        kt_ctx_free(&kt1);
        long at = kt_bitdiff(yt, y1, (size_t)(m * ldy), 4);
        if (at >= 0)
            fx_test_fail(__FILE__, __LINE__, "%s m=%lld: %d threads differ from 2 at %ld", kt_name(kt), (long long)m,
                         threads, at);
    }

    const int bf16_dot = fx_kernels_uses_bf16_dot(kt);
    const double tol = bf16_dot ? 2e-2 : 1e-5;
    double worst = 0;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < ldy; j++) {
            double ref = 0, mag = 0;
            for (int q = 0; q < c->nt && j < n; q++) {
                const fx_delta *d = &chain[q];
                if (j < d->row0 || j >= d->row0 + d->rows) continue;
                const int64_t row = c->src0[q] + j - d->row0;
                double g = d->scale * (c->mode == FX_EPI_GATED_ACCUMULATE ? gate[j] : 1.0), s = 0, a = 0;
                for (int64_t p = 0; p < k; p++) {
                    double v = td[q].dw[row * k + p] * x[i * ldx + p];
                    s += v, a += fabs(v);
                }
                /* factored W2: the products see Σ|w1|·|c|·|a·x| terms */
                if (c->spec[q].kind == FX_DELTA_KRON && c->spec[q].r) {
                    const term_spec *sp = &c->spec[q];
                    const int64_t o = row, i1 = o / sp->k2, i2 = o % sp->k2;
                    a = 0;
                    for (int64_t j1 = 0; j1 < sp->m1; j1++)
                        for (int64_t r = 0; r < sp->r; r++) {
                            double ax = 0;
                            for (int64_t j2 = 0; j2 < sp->n2; j2++)
                                ax += fabs(factor_at(td[q].a, FX_DTYPE_F32, r * sp->n2 + j2) * x[i * ldx + j1 * sp->n2 + j2]);
                            a += fabs(factor_at(td[q].b, sp->dt, i1 * sp->m1 + j1)) *
                                 fabs(factor_at(td[q].c, sp->dt, i2 * sp->r + r)) * ax;
                        }
                }
                /* B·A: the two-step products see Σ|b|·|a·x| terms */
                if (c->spec[q].kind == FX_DELTA_LOWRANK) {
                    a = 0;
                    const term_spec *sp = &c->spec[q];
                    for (int64_t r = 0; r < sp->r; r++) {
                        double ax = 0;
                        for (int64_t p = 0; p < k; p++) ax += fabs(factor_at(td[q].a, sp->dt, r * k + p) * x[i * ldx + p]);
                        a += fabs(factor_at(td[q].b, sp->dt, row * sp->r + r)) * ax;
                    }
                }
                ref += g * s;
                mag += fabs(g) * a;
            }
            const double got = (double)y1[i * ldy + j] - (double)y0[i * ldy + j];
            if (ref == 0 && mag == 0) {
                if (memcmp(&y1[i * ldy + j], &y0[i * ldy + j], 4)) {
                    fx_test_fail(__FILE__, __LINE__, "%s: element (%lld, %lld) outside every term changed",
                                 kt_name(kt), (long long)i, (long long)j);
                    worst = INFINITY;
                }
                continue;
            }
            double ratio = fabs(got - ref) / (tol * (mag + fabs((double)y0[i * ldy + j])));
            if (!(ratio <= worst)) worst = ratio;
        }
    for (int i = 0; i < c->nt; i++) free_term(&td[i]);
    free(x), free(y0), free(y1), free(yt), free(yinit), free(bias), free(gate), free(wbuf);
    return worst;
}

static void check_layer(const char *what, const layer_case *c) {
    kt_isas l = kt_isas_list(what, 1);
    static const int64_t ms[] = {1, 3, 37, 130};
    for (int i = 0; i < l.n; i++)
        for (size_t mi = 0; mi < sizeof ms / sizeof *ms; mi++)
            for (int mode = 0; mode < 3; mode++) {
                layer_case cc = *c;
                cc.m = KT_SMALL && ms[mi] > 37 ? 37 : ms[mi];
                cc.mode = (fx_epilogue_mode)mode;
                double r = run_layer(l.k[i], &cc, 1000 + mi * 7 + (uint64_t)mode);
                CHECK_MSG(r <= 1.0, "%s %s m=%lld mode %d: error %.3g x the tolerance", what, kt_name(l.k[i]),
                          (long long)cc.m, mode, r);
            }
}

TEST(kernel_delta_lowrank) {
    /* a fused [3·24, 40] layer; a B·A term over its 72 rows (BFL qkv) and
     * a second rank-5 term on the middle third only (a split to_k) */
    layer_case c = {.n = 72, .k = 40, .xpad = 3, .ypad = 5, .nt = 2};
    c.spec[0] = (term_spec){FX_DELTA_LOWRANK, FX_DTYPE_BF16, .r = 8, .scale = 0.75f};
    c.out[0] = 72, c.src0[0] = 0, c.rows[0] = 72, c.dst0[0] = 0;
    c.spec[1] = (term_spec){FX_DELTA_LOWRANK, FX_DTYPE_F32, .r = 5, .scale = -0.4f};
    c.out[1] = 24, c.src0[1] = 0, c.rows[1] = 24, c.dst0[1] = 24;
    check_layer("kernel_delta_lowrank", &c);
}

TEST(kernel_delta_rows) {
    /* one B·A term cut into pieces: its rows 30..49 at output 5, f16 factors */
    layer_case c = {.n = 33, .k = 19, .nt = 1};
    c.spec[0] = (term_spec){FX_DELTA_LOWRANK, FX_DTYPE_F16, .r = 3, .scale = 2.0f};
    c.out[0] = 60, c.src0[0] = 30, c.rows[0] = 20, c.dst0[0] = 5;
    check_layer("kernel_delta_rows", &c);
}

TEST(kernel_delta_dense) {
    layer_case c = {.n = 48, .k = 36, .ypad = 2, .nt = 2};
    c.spec[0] = (term_spec){FX_DELTA_DENSE, FX_DTYPE_BF16, .scale = 0.5f};
    c.out[0] = 48, c.src0[0] = 0, c.rows[0] = 48, c.dst0[0] = 0;
    c.spec[1] = (term_spec){FX_DELTA_DENSE, FX_DTYPE_F32, .scale = 1.0f};
    c.out[1] = 32, c.src0[1] = 16, c.rows[1] = 16, c.dst0[1] = 0;
    check_layer("kernel_delta_dense", &c);
}

TEST(kernel_delta_kron) {
    /* W1 [4, 3] ⊗ W2 [6, 12] = [24, 36] on a layer of 36 inputs: the whole
     * term, and rows 7..21 of another (not aligned to k2 = 6) at column 2 */
    layer_case c = {.n = 40, .k = 36, .xpad = 4, .nt = 2};
    c.spec[0] = (term_spec){FX_DELTA_KRON, FX_DTYPE_BF16, .l = 4, .m1 = 3, .k2 = 6, .n2 = 12, .scale = 0.6f};
    c.out[0] = 24, c.src0[0] = 0, c.rows[0] = 24, c.dst0[0] = 16;
    c.spec[1] = (term_spec){FX_DELTA_KRON, FX_DTYPE_F32, .l = 4, .m1 = 3, .k2 = 6, .n2 = 12, .scale = -1.5f};
    c.out[1] = 24, c.src0[1] = 7, c.rows[1] = 15, c.dst0[1] = 2;
    check_layer("kernel_delta_kron", &c);
    /* contiguous X (ldx = k: no copy) */
    c.xpad = 0;
    check_layer("kernel_delta_kron_contiguous", &c);
    /* W2 = c [6, 3] · a [3, 12] (LyCORIS lokr_w2_a · lokr_w2_b) */
    c.xpad = 2;
    c.spec[0].r = 3;
    c.spec[1].r = 2;
    check_layer("kernel_delta_kron_factored", &c);
}

TEST(kernel_delta_check) {
    float a[12] = {0}, b[12] = {0};
    char why[160];
    fx_delta d = {.kind = FX_DELTA_LOWRANK, .scale = 1.0f, .row0 = 0, .rows = 4,
                  .a = {a, FX_DTYPE_F32, 2, 6, 6, NULL}, .b = {b, FX_DTYPE_F32, 4, 2, 2, NULL}};
    CHECK(fx_delta_check(&d, 4, 6, why, sizeof why) == 0);
    CHECK(fx_delta_check(&d, 4, 5, why, sizeof why) == -1); /* A's columns */
    CHECK(strstr(why, "do not fit") != NULL);
    CHECK(fx_delta_check(&d, 3, 6, why, sizeof why) == -1); /* rows outside */
    fx_delta z = d;
    z.scale = 0.0f;
    CHECK(fx_delta_check(&z, 4, 6, why, sizeof why) == -1);
    z.scale = NAN;
    CHECK(fx_delta_check(&z, 4, 6, why, sizeof why) == -1);
    fx_delta rk = d;
    rk.b.k = 3, rk.b.ld = 3; /* rank of B differs from A */
    CHECK(fx_delta_check(&rk, 4, 6, why, sizeof why) == -1);
    fx_delta kr = {.kind = FX_DELTA_KRON, .scale = 1.0f, .row0 = 0, .rows = 4,
                   .a = {a, FX_DTYPE_F32, 2, 3, 3, NULL}, .b = {b, FX_DTYPE_F32, 2, 2, 2, NULL}};
    CHECK(fx_delta_check(&kr, 4, 6, why, sizeof why) == 0);
    CHECK(fx_delta_check(&kr, 4, 7, why, sizeof why) == -1);
    fx_delta kf = kr; /* W2 = c [2, 2] · a [2, 3] */
    kf.c = (fx_weight){.data = b + 4, .dtype = FX_DTYPE_F32, .n = 2, .k = 2, .ld = 2};
    CHECK(fx_delta_check(&kf, 4, 6, why, sizeof why) == 0);
    kf.c.k = 3, kf.c.ld = 3; /* c's rank 3, a's 2 */
    CHECK(fx_delta_check(&kf, 4, 6, why, sizeof why) == -1 && strstr(why, "differ in rank"));
    kr.kron_skip = 1;
    CHECK(fx_delta_check(&kr, 4, 6, why, sizeof why) == -1); /* 1 + 4 rows > 2·2 */
    /* a refused term is skipped by fx_linear: the plain layer */
    float x[6] = {1, 2, 3, 4, 5, 6}, y0[4], y1[4], w[24];
    for (int i = 0; i < 24; i++) w[i] = (float)(i % 5) - 2.0f;
    fx_weight plain = {.data = w, .dtype = FX_DTYPE_F32, .n = 4, .k = 6, .ld = 6}, with = plain;
    with.delta = &rk;
    fx_kctx kc = kt_ctx(kt_scalar(), 1);
    fx_linear(&kc, 1, x, 6, &plain, y0, 4, NULL);
    fx_linear(&kc, 1, x, 6, &with, y1, 4, NULL);
    kt_ctx_free(&kc);
    CHECK(!memcmp(y0, y1, sizeof y0));
}
