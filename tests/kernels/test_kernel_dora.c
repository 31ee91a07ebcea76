/*
 * test_kernel_dora.c — the DoRA parts of fx_linear's terms (kernels.h) on
 * every ISA this machine runs:
 *
 *   - a term with w_gate and row_scale makes the layer
 *     W'_j = w_gate[j]·W_j + s·row_scale[j]·ΔW_j on its columns, with the
 *     bias added once and ungated by DoRA, in the three epilogue modes,
 *     next to a plain term on other columns, on bf16 and Q4_0 weights;
 *     against a double-precision reference, tolerance per element
 *     tol·(M + |Y|) with M the sum of |products| (tol 1e-5 on f32-math
 *     tables, 2e-2 where bf16 dot products round X, as test_kernel_delta);
 *     1 and 3 threads bit-identical;
 *   - fx_delta_row_norms: ‖W_j + s·ΔW_j‖ for LOWRANK, DENSE and factored
 *     KRON terms cut to a row range, on f32, bf16 and Q4_0 weights, against
 *     the norms in double of the dequantized W (fx_dequantize) and ΔW built
 *     in double: relative error <= 1e-6 (ΔW rows rounded to f32 once, sums
 *     in double); bit-identical for 1 and 3 threads;
 *   - fx_delta_chain_check: a gated term's columns overlapped by another.
 */
#include "tests/kernels/kernel_isas.h"

#include "simd/gemm/gemm.h"

static double value_at(const void *p, fx_dtype dt, int64_t i) {
    if (dt == FX_DTYPE_F32) return ((const float *)p)[i];
    const uint16_t h = ((const uint16_t *)p)[i];
    return dt == FX_DTYPE_BF16 ? fx_bf16_bits_to_f32(h) : fx_f16_bits_to_f32(h);
}

/* W [n, k] of dtype dt from uniform values × amp; *deq = its values as
 * the kernels read them (dequantized). */
static void *make_weight(fx_test_rng *r, fx_dtype dt, int64_t n, int64_t k, float amp, double **deq) {
    float *f = malloc((size_t)(n * k) * sizeof *f), *row = malloc((size_t)k * sizeof *row);
    fx_test_fill_uniform(r, f, (size_t)(n * k), amp);
    const int64_t rb = fx_dtype_row_bytes(dt, k);
    unsigned char *w = malloc((size_t)(n * rb));
    *deq = malloc((size_t)(n * k) * sizeof **deq);
    for (int64_t i = 0; i < n; i++) {
        fx_quantize_row(dt, f + i * k, k, w + i * rb);
        fx_dequantize_row(dt, w + i * rb, k, row);
        for (int64_t j = 0; j < k; j++) (*deq)[i * k + j] = row[j];
    }
    free(f), free(row);
    return w;
}

static void *make_factor(fx_test_rng *r, fx_dtype dt, int64_t n, float amp) {
    float *f = malloc((size_t)n * sizeof *f);
    fx_test_fill_uniform(r, f, (size_t)n, amp);
    void *p = malloc((size_t)n * fx_dtype_size(dt));
    for (int64_t i = 0; i < n; i++) {
        if (dt == FX_DTYPE_F32) ((float *)p)[i] = f[i];
        else if (dt == FX_DTYPE_BF16) ((uint16_t *)p)[i] = fx_f32_to_bf16_bits(f[i]);
        else ((uint16_t *)p)[i] = fx_f32_to_f16_bits(f[i]);
    }
    free(f);
    return p;
}

/* ------------------------------------------------------------------------ */
/* Gated layers                                                             */
/* ------------------------------------------------------------------------ */

/* Layer [n = 70, k = 64]: a DoRA B·A term (rank 4, scale s) on columns
 * [10, 40), a plain B·A term on [50, 66). Returns the worst error ratio. */
static double run_gated(const fx_kernels *kt, fx_dtype wdt, fx_epilogue_mode mode, int64_t m, uint64_t seed) {
    enum { N = 70, K = 64, R = 4, D0 = 10, DR = 30, P0 = 50, PR = 16 };
    const int64_t ldy = N + 3;
    fx_test_rng rng;
    fx_test_rng_seed(&rng, seed);
    float *x = kt_alloc((size_t)(m * K)), *y = kt_alloc((size_t)(m * ldy)), *yt = kt_alloc((size_t)(m * ldy));
    float *yinit = kt_alloc((size_t)(m * ldy)), *bias = kt_alloc(N), *gate = kt_alloc(N), *wg = kt_alloc(DR),
          *rs = kt_alloc(DR);
    fx_test_fill_uniform(&rng, x, (size_t)(m * K), 1.0f);
    fx_test_fill_uniform(&rng, yinit, (size_t)(m * ldy), 2.0f);
    fx_test_fill_uniform(&rng, bias, N, 1.0f);
    fx_test_fill_uniform(&rng, gate, N, 1.5f);
    for (int j = 0; j < DR; j++) wg[j] = 1.0f + 0.5f * fx_test_rng_uniform(&rng), rs[j] = 1.0f + 0.5f * fx_test_rng_uniform(&rng);
    double *w = NULL;
    void *wbuf = make_weight(&rng, wdt, N, K, 0.3f, &w);
    void *a0 = make_factor(&rng, FX_DTYPE_BF16, R * K, 0.5f), *b0 = make_factor(&rng, FX_DTYPE_BF16, DR * R, 0.5f);
    void *a1 = make_factor(&rng, FX_DTYPE_F32, R * K, 0.5f), *b1 = make_factor(&rng, FX_DTYPE_F32, PR * R, 0.5f);
    fx_delta t[2] = {
        {.kind = FX_DELTA_LOWRANK, .scale = 0.7f, .row0 = D0, .rows = DR, .a = {a0, FX_DTYPE_BF16, R, K, K, NULL},
         .b = {b0, FX_DTYPE_BF16, DR, R, R, NULL}, .w_gate = wg, .row_scale = rs},
        {.kind = FX_DELTA_LOWRANK, .scale = -0.4f, .row0 = P0, .rows = PR, .a = {a1, FX_DTYPE_F32, R, K, K, NULL},
         .b = {b1, FX_DTYPE_F32, PR, R, R, NULL}},
    };
    t[0].next = &t[1];
    const fx_weight lw = {.data = wbuf, .dtype = wdt, .n = N, .k = K, .ld = K, .delta = &t[0]};
    const fx_epilogue epi = {mode, bias, mode == FX_EPI_GATED_ACCUMULATE ? gate : NULL};
    fx_kctx kc = kt_ctx(kt, 2);
    memcpy(y, yinit, sizeof(float) * (size_t)(m * ldy));
    fx_linear(&kc, m, x, K, &lw, y, ldy, &epi);
    kt_ctx_free(&kc);
    for (int threads = 1; threads <= 3; threads += 2) {
        fx_kctx k1 = kt_ctx(kt, threads);
        memcpy(yt, yinit, sizeof(float) * (size_t)(m * ldy));
        fx_linear(&k1, m, x, K, &lw, yt, ldy, &epi);
        kt_ctx_free(&k1);
        long at = kt_bitdiff(yt, y, (size_t)(m * ldy), 4);
        if (at >= 0) fx_test_fail(__FILE__, __LINE__, "%s: %d threads differ from 2 at %ld", kt_name(kt), threads, at);
    }
    const double tol = fx_kernels_uses_bf16_dot(kt) ? 2e-2 : 1e-5;
    double worst = 0;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < ldy; j++) {
            const double init = yinit[i * ldy + j];
            if (j >= N) { /* the padding stays as it was */
                if (memcmp(&y[i * ldy + j], &yinit[i * ldy + j], 4)) worst = INFINITY;
                continue;
            }
            double main = 0, mainmag = 0;
            for (int64_t p = 0; p < K; p++) main += w[j * K + p] * x[i * K + p], mainmag += fabs(w[j * K + p] * x[i * K + p]);
            double term = 0, termmag = 0, wgj = 1;
            for (int q = 0; q < 2; q++) {
                const fx_delta *d = &t[q];
                if (j < d->row0 || j >= d->row0 + d->rows) continue;
                const int64_t row = j - d->row0;
                const double g = (double)d->scale * (d->row_scale ? d->row_scale[row] : 1.0);
                if (d->w_gate) wgj = d->w_gate[row];
                for (int64_t r = 0; r < R; r++) {
                    double ax = 0, axm = 0;
                    for (int64_t p = 0; p < K; p++) {
                        const double v = value_at(d->a.data, d->a.dtype, r * K + p) * x[i * K + p];
                        ax += v, axm += fabs(v);
                    }
                    const double bv = value_at(d->b.data, d->b.dtype, row * R + r);
                    term += g * bv * ax, termmag += fabs(g * bv) * axm;
                }
            }
            const double gj = mode == FX_EPI_GATED_ACCUMULATE ? gate[j] : 1.0;
            const double pre = wgj * main + term + bias[j];
            const double ref = mode == FX_EPI_STORE ? pre : init + gj * pre;
            const double mag = fabs(gj) * (fabs(wgj) * mainmag + termmag + fabs(bias[j])) + fabs(init);
            const double ratio = fabs((double)y[i * ldy + j] - ref) / (tol * mag);
            if (!(ratio <= worst)) worst = ratio;
        }
    free(x), free(y), free(yt), free(yinit), free(bias), free(gate), free(wg), free(rs);
    free(w), free(wbuf), free(a0), free(b0), free(a1), free(b1);
    return worst;
}

TEST(kernel_dora_gated_layer) {
    kt_isas l = kt_isas_list("kernel_dora_gated_layer", 1);
    static const int64_t ms[] = {1, 5, 37};
    static const fx_dtype wdts[] = {FX_DTYPE_BF16, FX_DTYPE_Q4_0};
    for (int i = 0; i < l.n; i++)
        for (int wi = 0; wi < 2; wi++)
            for (size_t mi = 0; mi < sizeof ms / sizeof *ms; mi++)
                for (int mode = 0; mode < 3; mode++) {
                    const double r = run_gated(l.k[i], wdts[wi], (fx_epilogue_mode)mode, ms[mi], 77 + mi * 5 + (uint64_t)mode);
                    CHECK_MSG(r <= 1.0, "%s %s m=%lld mode %d: error %.3g x the tolerance", kt_name(l.k[i]),
                              fx_dtype_name(wdts[wi]), (long long)ms[mi], mode, r);
                }
}

/* ------------------------------------------------------------------------ */
/* Row norms                                                                */
/* ------------------------------------------------------------------------ */

/* ‖W[row0 + j] + s·ΔW[src0 + j]‖ in double against fx_delta_row_norms. */
static void check_norms(const fx_kernels *kt, const char *what, fx_dtype wdt, const fx_delta *full, const double *dw,
                        int64_t n, int64_t k, int64_t src0, int64_t rows, int64_t dst0, double s, uint64_t seed) {
    fx_test_rng rng;
    fx_test_rng_seed(&rng, seed);
    double *w = NULL;
    void *wbuf = make_weight(&rng, wdt, n, k, 0.3f, &w);
    const fx_weight lw = {.data = wbuf, .dtype = wdt, .n = n, .k = k, .ld = k};
    const fx_delta d = fx_delta_rows(full, src0, rows, dst0);
    double *got = malloc((size_t)rows * sizeof *got), *again = malloc((size_t)rows * sizeof *again);
    fx_kctx kc = kt_ctx(kt, 2);
    CHECK(fx_delta_row_norms(&kc, &lw, &d, s, got) == 0);
    kt_ctx_free(&kc);
    for (int threads = 1; threads <= 3; threads += 2) {
        fx_kctx k1 = kt_ctx(kt, threads);
        CHECK(fx_delta_row_norms(&k1, &lw, &d, s, again) == 0);
        kt_ctx_free(&k1);
        CHECK_MSG(!memcmp(got, again, (size_t)rows * sizeof *got), "%s %s: %d threads differ", what, kt_name(kt), threads);
    }
    double worst = 0;
    for (int64_t j = 0; j < rows; j++) {
        double sum = 0;
        for (int64_t p = 0; p < k; p++) {
            const double v = w[(dst0 + j) * k + p] + s * dw[(src0 + j) * k + p];
            sum += v * v;
        }
        const double e = fabs(got[j] - sqrt(sum)) / sqrt(sum);
        if (!(e <= worst)) worst = e;
    }
    CHECK_MSG(worst <= 1e-6, "%s %s on %s: relative error %.3g", what, kt_name(kt), fx_dtype_name(wdt), worst);
    free(w), free(wbuf), free(got), free(again);
}

TEST(kernel_dora_row_norms) {
    enum { N = 40, K = 64, OUT = 48, R = 5 };
    fx_test_rng rng;
    fx_test_rng_seed(&rng, 4242);
    double *dw = calloc((size_t)(OUT * K), sizeof *dw);
    /* LOWRANK B [48, 5] · A [5, 64], bf16 */
    void *a = make_factor(&rng, FX_DTYPE_BF16, R * K, 0.5f), *b = make_factor(&rng, FX_DTYPE_BF16, OUT * R, 0.5f);
    const fx_delta lr = {.kind = FX_DELTA_LOWRANK, .scale = 1.0f, .rows = OUT, .a = {a, FX_DTYPE_BF16, R, K, K, NULL},
                         .b = {b, FX_DTYPE_BF16, OUT, R, R, NULL}};
    for (int64_t i = 0; i < OUT; i++)
        for (int64_t j = 0; j < K; j++)
            for (int64_t q = 0; q < R; q++)
                dw[i * K + j] += value_at(b, FX_DTYPE_BF16, i * R + q) * value_at(a, FX_DTYPE_BF16, q * K + j);
    /* DENSE ΔW [48, 64], f16 */
    void *dd = make_factor(&rng, FX_DTYPE_F16, OUT * K, 0.5f);
    const fx_delta dn = {.kind = FX_DELTA_DENSE, .scale = 1.0f, .rows = OUT, .a = {dd, FX_DTYPE_F16, OUT, K, K, NULL}};
    double *dwd = malloc((size_t)(OUT * K) * sizeof *dwd);
    for (int64_t i = 0; i < OUT * K; i++) dwd[i] = value_at(dd, FX_DTYPE_F16, i);
    /* KRON W1 [4, 2] ⊗ (c [12, 3] · a [3, 32]) = [48, 64] */
    void *w1 = make_factor(&rng, FX_DTYPE_BF16, 4 * 2, 1.0f), *kc_ = make_factor(&rng, FX_DTYPE_BF16, 12 * 3, 0.5f),
         *ka = make_factor(&rng, FX_DTYPE_F32, 3 * 32, 0.5f);
    const fx_delta kr = {.kind = FX_DELTA_KRON, .scale = 1.0f, .rows = OUT, .a = {ka, FX_DTYPE_F32, 3, 32, 32, NULL},
                         .b = {w1, FX_DTYPE_BF16, 4, 2, 2, NULL}, .c = {kc_, FX_DTYPE_BF16, 12, 3, 3, NULL}};
    double *dwk = calloc((size_t)(OUT * K), sizeof *dwk);
    for (int64_t i1 = 0; i1 < 4; i1++)
        for (int64_t i2 = 0; i2 < 12; i2++)
            for (int64_t j1 = 0; j1 < 2; j1++)
                for (int64_t j2 = 0; j2 < 32; j2++) {
                    double w2 = 0;
                    for (int64_t q = 0; q < 3; q++)
                        w2 += value_at(kc_, FX_DTYPE_BF16, i2 * 3 + q) * value_at(ka, FX_DTYPE_F32, q * 32 + j2);
                    /* the kernel forms W2 in f32 first */
                    dwk[(i1 * 12 + i2) * K + j1 * 32 + j2] = value_at(w1, FX_DTYPE_BF16, i1 * 2 + j1) * (double)(float)w2;
                }
    kt_isas l = kt_isas_list("kernel_dora_row_norms", 1);
    static const fx_dtype wdts[] = {FX_DTYPE_F32, FX_DTYPE_BF16, FX_DTYPE_Q4_0};
    for (int i = 0; i < l.n; i++)
        for (int wi = 0; wi < 3; wi++) {
            /* ΔW rows 7..36 onto W rows 3..32; the whole term on rows 0..39 of a 48-row W would not fit: N = 40 */
            check_norms(l.k[i], "lowrank", wdts[wi], &lr, dw, N, K, 7, 30, 3, 0.75, 11 + wi);
            check_norms(l.k[i], "dense", wdts[wi], &dn, dwd, N, K, 0, 40, 0, -1.25, 12 + wi);
            check_norms(l.k[i], "kron", wdts[wi], &kr, dwk, N, K, 5, 35, 4, 0.5, 13 + wi);
        }
    free(dw), free(a), free(b), free(dd), free(dwd), free(w1), free(kc_), free(ka), free(dwk);
}

TEST(kernel_dora_chain_check) {
    float f[4] = {0}, g[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    fx_delta t[3] = {{.row0 = 0, .rows = 4, .a = {f, FX_DTYPE_F32, 1, 4, 4, NULL}},
                     {.row0 = 4, .rows = 8, .w_gate = g, .a = {f, FX_DTYPE_F32, 1, 4, 4, NULL}},
                     {.row0 = 12, .rows = 2, .a = {f, FX_DTYPE_F32, 1, 4, 4, NULL}}};
    t[0].next = &t[1], t[1].next = &t[2];
    int x = -1, y = -1;
    CHECK(fx_delta_chain_check(&t[0], &x, &y) == 0);
    t[2].row0 = 11; /* one column of the gated term */
    CHECK(fx_delta_chain_check(&t[0], &x, &y) == -1 && x == 1 && y == 2);
    t[2].row0 = 12, t[0].rows = 5;
    CHECK(fx_delta_chain_check(&t[0], &x, &y) == -1 && x == 0 && y == 1);
    t[0].w_gate = g, t[1].w_gate = NULL, t[0].rows = 4; /* a gated term first, touching but not overlapping */
    CHECK(fx_delta_chain_check(&t[0], &x, &y) == 0);
}
