/*
 * test_kernel_conv2d.c — fx_conv2d (im2col strips + fx_linear) against a
 * naive direct convolution in double, on every ISA (and the f32-forced
 * variant of the bf16 table), for the VAE's geometries: 3×3 stride 1 pad 1,
 * 3×3 stride 2 padded right/bottom only (downsample), 1×1, nearest ×2
 * upsample + 3×3, odd sizes, several im2col strips, bias and accumulate
 * epilogues, output row ranges.
 *
 * Tolerances, as max|y − ref| / max|ref| over the output:
 *  - f32 weights, and bf16 weights widened to f32 (FMA paths): 1e-5
 *    (f32 sums of up to 4608 products);
 *  - bf16 weights on the bf16 dot-product path (X rounded to bf16 too):
 *    1e-2 (8 significant bits per factor) vs the reference, and 1e-5 vs the
 *    reference computed from X rounded to bf16 as the kernel rounds it
 *    (products of two bf16 values are exact: only f32 sums remain), which
 *    a 0.5% error of the kernel would fail.
 * Exact checks: rows outside [row0, row1) untouched; a row range equals
 * the same rows of the full output bitwise; 1 vs 2 vs 3 threads bitwise.
 */
#include "kernel_isas.h"

typedef struct conv_case {
    const char *name;
    fx_conv2d_geom g;
    fx_dtype wt;
    int epi; /* 0 store, 1 store + bias, 2 accumulate + bias */
    int row0, row1;
} conv_case;

/* h, w, cin, cout, kh, kw, stride, pad t/l/b/r, upsample2x */
static const conv_case cases[] = {
    {"3x3 s1 p1", {7, 9, 5, 6, 3, 3, 1, 1, 1, 1, 1, 0}, FX_DTYPE_F32, 1, 0, 0},
    {"3x3 s1 p1 bf16", {9, 7, 16, 17, 3, 3, 1, 1, 1, 1, 1, 0}, FX_DTYPE_BF16, 2, 0, 0},
    {"3x3 s2 pad r/b (downsample)", {8, 10, 6, 5, 3, 3, 2, 0, 0, 1, 1, 0}, FX_DTYPE_BF16, 1, 0, 0},
    {"3x3 s2 pad r/b odd", {9, 7, 3, 4, 3, 3, 2, 0, 0, 1, 1, 0}, FX_DTYPE_F32, 0, 0, 0},
    {"1x1", {5, 7, 17, 33, 1, 1, 1, 0, 0, 0, 0, 0}, FX_DTYPE_BF16, 2, 0, 0},
    {"1x1 f32", {3, 11, 33, 7, 1, 1, 1, 0, 0, 0, 0, 0}, FX_DTYPE_F32, 1, 0, 0},
    {"upsample2x + 3x3", {5, 4, 8, 6, 3, 3, 1, 1, 1, 1, 1, 1}, FX_DTYPE_BF16, 1, 0, 0},
    {"upsample2x odd", {3, 5, 7, 3, 3, 3, 1, 1, 1, 1, 1, 1}, FX_DTYPE_F32, 2, 0, 0},
    {"rows [2,5)", {9, 11, 6, 8, 3, 3, 1, 1, 1, 1, 1, 0}, FX_DTYPE_BF16, 1, 2, 5},
    {"upsample rows [3,8)", {6, 7, 5, 4, 3, 3, 1, 1, 1, 1, 1, 1}, FX_DTYPE_F32, 2, 3, 8},
    {"asymmetric pads", {6, 6, 4, 5, 3, 3, 1, 2, 0, 0, 1, 0}, FX_DTYPE_F32, 1, 0, 0},
    {"conv_out 128->3", {12, 10, 128, 3, 3, 3, 1, 1, 1, 1, 1, 0}, FX_DTYPE_BF16, 1, 0, 0},
#if !KT_SMALL
    /* im2col row = 64·4608·4 B = 1.2 MB: 3-row strips (4 MiB budget) over 16 rows */
    {"strips cin 512", {16, 64, 512, 8, 3, 3, 1, 1, 1, 1, 1, 0}, FX_DTYPE_BF16, 2, 0, 0},
    {"strips upsample", {8, 32, 512, 8, 3, 3, 1, 1, 1, 1, 1, 1}, FX_DTYPE_F32, 1, 0, 0},
#endif
};

static void conv_ref(const fx_conv2d_geom *g, const float *x, const double *w, const float *bias,
                     const float *y0, int epi, double *out) {
    int ho, wo;
    fx_conv2d_out_size(g, &ho, &wo);
    int up = g->upsample2x ? 1 : 0;
    int hh = g->h << up, ww = g->w << up;
    for (int oy = 0; oy < ho; oy++)
        for (int ox = 0; ox < wo; ox++)
            for (int co = 0; co < g->cout; co++) {
                double s = 0;
                for (int ci = 0; ci < g->cin; ci++)
                    for (int ky = 0; ky < g->kh; ky++)
                        for (int kx = 0; kx < g->kw; kx++) {
                            int iy = oy * g->stride - g->pad_top + ky, ix = ox * g->stride - g->pad_left + kx;
                            if (iy < 0 || iy >= hh || ix < 0 || ix >= ww) continue;
                            double xv = x[((iy >> up) * g->w + (ix >> up)) * g->cin + ci];
                            s += xv * w[((co * g->cin + ci) * g->kh + ky) * g->kw + kx];
                        }
                if (epi >= 1) s += bias[co];
                size_t o = ((size_t)oy * wo + ox) * g->cout + co;
                out[o] = epi == 2 ? y0[o] + s : s;
            }
}

static double rel_err_d(const float *a, const double *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs(a[i] - b[i]);
        if (d > num || d != d) num = d;
        if (fabs(b[i]) > den) den = fabs(b[i]);
    }
    return den > 0 ? num / den : num;
}

TEST(kernel_conv2d_out_size) {
    fx_conv2d_geom g = {64, 48, 3, 128, 3, 3, 1, 1, 1, 1, 1, 0};
    int ho, wo;
    fx_conv2d_out_size(&g, &ho, &wo);
    CHECK(ho == 64 && wo == 48);
    g.stride = 2, g.pad_top = g.pad_left = 0; /* VAE downsample: pad (0,1,0,1) */
    fx_conv2d_out_size(&g, &ho, &wo);
    CHECK(ho == 32 && wo == 24);
    g.h = 63, g.w = 47;
    fx_conv2d_out_size(&g, &ho, &wo);
    CHECK(ho == 31 && wo == 23);
    g = (fx_conv2d_geom){32, 24, 512, 512, 3, 3, 1, 1, 1, 1, 1, 1}; /* upsample */
    fx_conv2d_out_size(&g, &ho, &wo);
    CHECK(ho == 64 && wo == 48);
    g = (fx_conv2d_geom){5, 5, 8, 8, 1, 1, 1, 0, 0, 0, 0, 0};
    fx_conv2d_out_size(&g, &ho, &wo);
    CHECK(ho == 5 && wo == 5);
    g.stride = 0; /* invalid geometries give 0×0 */
    fx_conv2d_out_size(&g, &ho, &wo);
    CHECK(ho == 0 && wo == 0);
    g = (fx_conv2d_geom){2, 2, 1, 1, 5, 5, 1, 0, 0, 0, 0, 0};
    fx_conv2d_out_size(&g, &ho, &wo);
    CHECK(ho == 0 && wo == 0);
}

TEST(kernel_conv2d) {
    kt_isas isas = kt_isas_list("conv2d", 1);
    int ncases = (int)(sizeof cases / sizeof cases[0]);
    for (int ci = 0; ci < ncases; ci++) {
        const conv_case *cc = &cases[ci];
        const fx_conv2d_geom *g = &cc->g;
        int ho, wo;
        fx_conv2d_out_size(g, &ho, &wo);
        REQUIRE(ho > 0 && wo > 0);
        int64_t kdim = (int64_t)g->cin * g->kh * g->kw;
        size_t nx = (size_t)g->h * g->w * g->cin, ny = (size_t)ho * wo * g->cout;
        size_t nw = (size_t)g->cout * (size_t)kdim;
        fx_test_rng r;
        fx_test_rng_seed(&r, 500 + (uint64_t)ci);
        float *x = kt_alloc(nx), *bias = kt_alloc((size_t)g->cout), *y0 = kt_alloc(ny);
        fx_test_fill_uniform(&r, x, nx, 1.0f);
        fx_test_fill_uniform(&r, bias, (size_t)g->cout, 0.5f);
        fx_test_fill_uniform(&r, y0, ny, 1.0f);
        double *wd = malloc(nw * sizeof(double)), *ref = malloc(ny * sizeof(double));
        void *wdata;
        if (cc->wt == FX_DTYPE_BF16) {
            uint16_t *wb = malloc(nw * 2);
            for (size_t i = 0; i < nw; i++) {
                wb[i] = fx_f32_to_bf16_bits(fx_test_rng_uniform(&r) / sqrtf((float)kdim));
                wd[i] = fx_bf16_bits_to_f32(wb[i]);
            }
            wdata = wb;
        } else {
            float *wf = kt_alloc(nw);
            for (size_t i = 0; i < nw; i++) wd[i] = wf[i] = fx_test_rng_uniform(&r) / sqrtf((float)kdim);
            wdata = wf;
        }
        fx_weight w = {.data = wdata, .dtype = cc->wt, .n = g->cout, .k = kdim, .ld = kdim};
        fx_epilogue epi = {cc->epi == 2 ? FX_EPI_ACCUMULATE : FX_EPI_STORE, cc->epi ? bias : NULL, NULL};
        conv_ref(g, x, wd, bias, y0, cc->epi, ref);
        /* the reference of the bf16 dot-product path: X rounded to bf16 */
        double *ref_b16 = malloc(ny * sizeof(double));
        float *xb = kt_alloc(nx);
        for (size_t i = 0; i < nx; i++) xb[i] = fx_bf16_bits_to_f32(fx_f32_to_bf16_bits(x[i]));
        conv_ref(g, xb, wd, bias, y0, cc->epi, ref_b16);
        int row0 = cc->row0, row1 = cc->row1 > 0 ? cc->row1 : ho;
        size_t lo = (size_t)row0 * wo * g->cout, hi = (size_t)row1 * wo * g->cout;

        for (int ii = 0; ii < isas.n; ii++) {
            const fx_kernels *k = isas.k[ii];
            int bf16dot = fx_kernels_uses_bf16_dot(k) && cc->wt == FX_DTYPE_BF16;
            double tol = bf16dot ? 1e-2 : 1e-5;
            float *first = NULL;
            for (int t = 1; t <= 3; t++) {
                float *y = kt_alloc(ny);
                memcpy(y, y0, ny * sizeof(float));
                fx_kctx kc = kt_ctx(k, t);
                fx_conv2d(&kc, g, x, &w, &epi, y, cc->row0, cc->row1);
                kt_ctx_free(&kc);
                double e = rel_err_d(y + lo, ref + lo, hi - lo);
                CHECK_MSG(e <= tol, "%s on %s%s (%d threads): rel err %.3g > %.3g", cc->name, kt_name(k),
                          bf16dot ? "/bf16dot" : "", t, e, tol);
                if (bf16dot) {
                    double eb = rel_err_d(y + lo, ref_b16 + lo, hi - lo);
                    CHECK_MSG(eb <= 1e-5, "%s on %s/bf16dot (%d threads): rel err %.3g vs the bf16-rounded "
                              "reference > 1e-5", cc->name, kt_name(k), t, eb);
                    for (size_t i = lo; i < hi; i++) ref_b16[i] *= 1.005; /* a 0.5% error must not pass */
                    CHECK_MSG(rel_err_d(y + lo, ref_b16 + lo, hi - lo) > 1e-5, "%s: a 0.5%% error passes", cc->name);
                    for (size_t i = lo; i < hi; i++) ref_b16[i] /= 1.005;
                }
                CHECK_MSG(kt_bitdiff(y, y0, lo, 4) < 0 && kt_bitdiff(y + hi, y0 + hi, ny - hi, 4) < 0,
                          "%s on %s: rows outside [%d, %d) were written", cc->name, kt_name(k), row0, row1);
                if (!first) first = y;
                else {
                    CHECK_MSG(kt_bitdiff(y, first, ny, 4) < 0, "%s on %s: %d threads differ from 1",
                              cc->name, kt_name(k), t);
                    free(y);
                }
            }
            if (cc->row1 > 0) { /* the range equals the same rows of a full run */
                float *full = kt_alloc(ny);
                memcpy(full, y0, ny * sizeof(float));
                fx_kctx kc = kt_ctx(k, 2);
                fx_conv2d(&kc, g, x, &w, &epi, full, 0, 0);
                kt_ctx_free(&kc);
                CHECK_MSG(kt_bitdiff(first + lo, full + lo, hi - lo, 4) < 0,
                          "%s on %s: row range differs from the full run", cc->name, kt_name(k));
                free(full);
            }
            free(first);
        }
        free(x), free(bias), free(y0), free(wd), free(ref), free(wdata), free(ref_b16), free(xb);
    }
}
