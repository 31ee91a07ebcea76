/*
 * test_kernel_conv2d_packed.c — the strip form of the conv (fx_conv2d_pack
 * once, fx_conv2d_packed per strip on a window of input rows), as the VAE
 * streams it: for the VAE's geometries (3×3 pad 1, upsample ×2, stride 2
 * padded right/bottom, 1×1, channels that are / are not a multiple of the
 * bf16 pair), on every ISA:
 *  - strips of 1, 2, 3 and 5 output rows, each given exactly the input rows
 *    fx_conv2d_input_rows names, equal the one-shot fx_conv2d bitwise;
 *  - a window one row short is refused (−1) and its strip set to NaN;
 *  - fx_conv2d_input_rows covers what the geometry reads (upsampled rows map
 *    to their source row; padding rows are not requested).
 */
#include "kernel_isas.h"

typedef struct strip_case {
    const char *name;
    fx_conv2d_geom g;
    fx_dtype wt;
} strip_case;

/* h, w, cin, cout, kh, kw, stride, pad t/l/b/r, upsample2x */
static const strip_case strip_cases[] = {
    {"3x3 pad 1", {11, 13, 32, 40, 3, 3, 1, 1, 1, 1, 1, 0}, FX_DTYPE_BF16},
    {"3x3 pad 1 odd cin", {9, 7, 5, 17, 3, 3, 1, 1, 1, 1, 1, 0}, FX_DTYPE_BF16},
    {"upsample x2", {6, 7, 16, 24, 3, 3, 1, 1, 1, 1, 1, 1}, FX_DTYPE_BF16},
    {"stride 2 pad r/b", {12, 10, 24, 16, 3, 3, 2, 0, 0, 1, 1, 0}, FX_DTYPE_F32},
    {"stride 2 pad r/b odd", {11, 9, 8, 8, 3, 3, 2, 0, 0, 1, 1, 0}, FX_DTYPE_BF16},
    {"1x1", {7, 9, 48, 20, 1, 1, 1, 0, 0, 0, 0, 0}, FX_DTYPE_BF16},
    {"conv_out to 3", {10, 8, 64, 3, 3, 3, 1, 1, 1, 1, 1, 0}, FX_DTYPE_F32},
};

TEST(kernel_conv2d_input_rows) {
    fx_conv2d_geom g = {10, 8, 4, 4, 3, 3, 1, 1, 1, 1, 1, 0};
    int a, b;
    fx_conv2d_input_rows(&g, 0, 3, &a, &b);
    CHECK(a == 0 && b == 4); /* rows -1 (padding) .. 3 */
    fx_conv2d_input_rows(&g, 4, 10, &a, &b);
    CHECK(a == 3 && b == 10); /* row 10 is padding */
    g.upsample2x = 1;         /* output rows 5..8 read upsampled rows 4..9 = source rows 2..4 */
    fx_conv2d_input_rows(&g, 5, 9, &a, &b);
    CHECK(a == 2 && b == 5);
    g = (fx_conv2d_geom){12, 10, 4, 4, 3, 3, 2, 0, 0, 1, 1, 0}; /* stride 2: rows 2r .. 2r + 2 */
    fx_conv2d_input_rows(&g, 2, 4, &a, &b);
    CHECK(a == 4 && b == 9);
    fx_conv2d_input_rows(&g, 5, 6, &a, &b); /* last row: 10, 11 and the bottom padding */
    CHECK(a == 10 && b == 12);
}

TEST(kernel_conv2d_packed_strips) {
    kt_isas isas = kt_isas_list("conv2d_packed", 1);
    const int ncases = (int)(sizeof strip_cases / sizeof strip_cases[0]);
    for (int ci = 0; ci < ncases; ci++) {
        const strip_case *sc = &strip_cases[ci];
        const fx_conv2d_geom *g = &sc->g;
        int ho, wo;
        fx_conv2d_out_size(g, &ho, &wo);
        REQUIRE(ho > 0 && wo > 0);
        const int64_t kdim = (int64_t)g->cin * g->kh * g->kw;
        const size_t nx = (size_t)g->h * g->w * g->cin, ny = (size_t)ho * wo * g->cout, nw = (size_t)g->cout * kdim;
        const size_t row_out = (size_t)wo * g->cout, row_in = (size_t)g->w * g->cin;
        fx_test_rng r;
        fx_test_rng_seed(&r, 900 + (uint64_t)ci);
        float *x = kt_alloc(nx), *bias = kt_alloc((size_t)g->cout);
        fx_test_fill_uniform(&r, x, nx, 1.0f);
        fx_test_fill_uniform(&r, bias, (size_t)g->cout, 0.5f);
        void *wdata;
        if (sc->wt == FX_DTYPE_BF16) {
            uint16_t *wb = malloc(nw * 2);
            for (size_t i = 0; i < nw; i++) wb[i] = fx_f32_to_bf16_bits(fx_test_rng_uniform(&r) / sqrtf((float)kdim));
            wdata = wb;
        } else {
            float *wf = kt_alloc(nw);
            for (size_t i = 0; i < nw; i++) wf[i] = fx_test_rng_uniform(&r) / sqrtf((float)kdim);
            wdata = wf;
        }
        const fx_weight w = {.data = wdata, .dtype = sc->wt, .n = g->cout, .k = kdim, .ld = kdim};
        const fx_epilogue epi = {FX_EPI_STORE, bias, NULL};
        for (int ii = 0; ii < isas.n; ii++) {
            const fx_kernels *k = isas.k[ii];
            fx_kctx kc = kt_ctx(k, 2);
            float *full = kt_alloc(ny), *y = kt_alloc(ny), *win = kt_alloc(nx);
            fx_conv2d(&kc, g, x, &w, &epi, full, 0, 0);
            size_t pb = fx_conv2d_packed_bytes(&kc, g, sc->wt);
            void *packed = aligned_alloc(64, (pb + 63) / 64 * 64);
            REQUIRE(pb > 0 && packed);
            CHECK(fx_conv2d_pack(&kc, g, &w, packed) == 0);
            static const int heights[4] = {1, 2, 3, 5};
            for (int hi = 0; hi < 4; hi++) {
                for (size_t i = 0; i < ny; i++) y[i] = -7.0f;
                for (int r0 = 0; r0 < ho; r0 += heights[hi]) {
                    int r1 = r0 + heights[hi] < ho ? r0 + heights[hi] : ho, a, b;
                    fx_conv2d_input_rows(g, r0, r1, &a, &b);
                    /* only the window: a copy, so reads outside it would be caught by ASan */
                    float *xw = b > a ? kt_alloc((size_t)(b - a) * row_in) : NULL;
                    if (xw) memcpy(xw, x + (size_t)a * row_in, (size_t)(b - a) * row_in * sizeof(float));
                    int rc = fx_conv2d_packed(&kc, g, xw, a, b - a, packed, &epi, y + (size_t)r0 * row_out, r0, r1);
                    CHECK_MSG(rc == 0, "%s on %s: strip %d..%d refused", sc->name, kt_name(k), r0, r1);
                    free(xw);
                }
                CHECK_MSG(kt_bitdiff(y, full, ny, 4) < 0, "%s on %s: strips of %d rows differ from fx_conv2d",
                          sc->name, kt_name(k), heights[hi]);
            }
            /* a window one row short at the end is refused, the strip set to NaN */
            int a, b, r0 = ho / 2, r1 = ho;
            fx_conv2d_input_rows(g, r0, r1, &a, &b);
            memcpy(win, x + (size_t)a * row_in, (size_t)(b - a) * row_in * sizeof(float));
            int rc = fx_conv2d_packed(&kc, g, win, a, b - a - 1, packed, &epi, y, r0, r1);
            CHECK_MSG(rc == -1 && isnan(y[0]), "%s on %s: a short window was accepted", sc->name, kt_name(k));
            free(packed), free(full), free(y), free(win);
            kt_ctx_free(&kc);
        }
        free(x), free(bias), free(wdata);
    }
}
