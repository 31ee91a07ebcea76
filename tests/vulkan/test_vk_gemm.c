/*
 * test_vk_gemm.c — fx_vk_linear and fx_vk_conv2d against the CPU scalar
 * kernels (fx_linear, fx_conv2d), for f32, bf16 and f16 weights, both GEMM
 * variants (register-blocked and shared-memory tiled), every epilogue,
 * odd shapes and strided views, and with a tiny binding limit that forces
 * passes over column and row windows.
 *
 * Tolerance: max|y − y_cpu| <= 2e-5 · max(1, max|y_cpu|). Both sides sum
 * k ≤ 300 products in f32 in different orders (the shader's four-wide dot
 * products, the CPU microkernel); weights are exact in f32 either way.
 */
#include "vk_test.h"

#include <string.h>

#define TOL 2e-5

/* A host weight [n, k] with row stride ld (elements), values in dt. */
static void *host_weight(fx_test_rng *r, fx_dtype dt, int64_t n, int64_t k, int64_t ld) {
    size_t es = dt == FX_DTYPE_F32 ? 4 : 2;
    void *w = calloc((size_t)(n * ld) + 1, es);
    for (int64_t i = 0; i < n * ld; i++) {
        float v = 0.5f * fx_test_rng_uniform(r);
        if (dt == FX_DTYPE_F32) ((float *)w)[i] = v;
        else if (dt == FX_DTYPE_BF16) ((uint16_t *)w)[i] = fx_f32_to_bf16_bits(v);
        else ((uint16_t *)w)[i] = fx_f32_to_f16_bits(v);
    }
    (void)k;
    return w;
}

typedef struct lin_case {
    int64_t m, n, k;
    fx_dtype dt;
    fx_epilogue_mode mode;
    int bias;
} lin_case;

static const lin_case lin_cases[] = {
    {1, 1, 1, FX_DTYPE_F32, FX_EPI_STORE, 0},
    {5, 7, 3, FX_DTYPE_BF16, FX_EPI_STORE, 1},
    {33, 65, 31, FX_DTYPE_F32, FX_EPI_ACCUMULATE, 1},
    {70, 40, 130, FX_DTYPE_BF16, FX_EPI_GATED_ACCUMULATE, 1},
    {17, 33, 64, FX_DTYPE_F16, FX_EPI_STORE, 1},
    {64, 64, 96, FX_DTYPE_BF16, FX_EPI_ACCUMULATE, 0},
    {3, 129, 257, FX_DTYPE_F32, FX_EPI_GATED_ACCUMULATE, 0},
    /* 128×128 tiles of the tiled variant; k not a multiple of the slab */
    {131, 133, 72, FX_DTYPE_BF16, FX_EPI_STORE, 1},
    {129, 130, 44, FX_DTYPE_F32, FX_EPI_ACCUMULATE, 0},
};

static void run_linear(fx_vk *vk, const lin_case *c, const char *label) {
    fx_test_rng r;
    fx_test_rng_seed(&r, (uint64_t)(c->m * 1000 + c->n * 10 + c->k));
    const int64_t wld = c->k + 1;
    void *w = host_weight(&r, c->dt, c->n, c->k, wld);
    fx_weight hw = {.data = w, .dtype = c->dt, .n = c->n, .k = c->k, .ld = wld};
    vkt_linear_vs_cpu(vk, &r, c->m, &hw, c->mode, c->bias, TOL, label);
    free(w);
}

static void linear_cases(fx_vk_gemm_variant v, uint64_t max_binding, const char *label) {
    fx_vk *vk = vkt_open_limits(v, max_binding, 0);
    if (!vk) return;
    const size_t ncases = sizeof lin_cases / sizeof lin_cases[0];
    for (size_t i = 0; i < ncases; i++) run_linear(vk, &lin_cases[i], label);
    vkt_check_passes(vk, label, ncases, max_binding, 3 * ncases);
    vkt_close(vk);
}

TEST(vk_linear_reg) { linear_cases(FX_VK_GEMM_REG, 0, "reg"); }
TEST(vk_linear_tiled) { linear_cases(FX_VK_GEMM_TILED, 0, "tiled"); }
/* 2 KiB bindings: a few rows of W, X and Y per pass. */
TEST(vk_linear_split_bindings) { linear_cases(FX_VK_GEMM_AUTO, 2048, "split"); }

TEST(vk_linear_k0_and_overlap) {
    fx_vk *vk = vkt_open(NULL);
    if (!vk) return;
    float bias[3] = {1, 2, 3}, y[6];
    fx_vk_buf *by = vkt_upload(vk, NULL, 6, "y"), *bb = vkt_upload(vk, bias, 3, "bias");
    float wdata[3] = {0};
    fx_weight hw = {.data = wdata, .dtype = FX_DTYPE_F32, .n = 3, .k = 0, .ld = 0};
    fx_vk_weight dw;
    fx_err err = {0};
    REQUIRE(by && bb);
    REQUIRE_MSG(fx_vk_weight_upload(vk, &hw, "w0", &dw, &err) == FLUX_OK, "%s", err.msg);
    fx_vk_epilogue e = {.mode = FX_EPI_STORE, .bias = {bb, 0}};
    CHECK(fx_vk_linear(vk, 2, (fx_vk_mat){0}, &dw, (fx_vk_mat){by, 0, 3}, &e, &err) == FLUX_OK);
    CHECK(fx_vk_download(vk, by, 0, y, sizeof y, &err) == FLUX_OK);
    CHECK(y[0] == 1 && y[2] == 3 && y[3] == 1 && y[5] == 3);
    fx_vk_weight_free(vk, &dw);
    /* x overlapping y is refused */
    float w1[9] = {0};
    fx_weight hw1 = {.data = w1, .dtype = FX_DTYPE_F32, .n = 3, .k = 3, .ld = 3};
    REQUIRE(fx_vk_weight_upload(vk, &hw1, "w1", &dw, &err) == FLUX_OK);
    CHECK_EQ_INT(fx_vk_linear(vk, 2, (fx_vk_mat){by, 0, 3}, &dw, (fx_vk_mat){by, 1, 3}, NULL, &err),
                 FLUX_ERR_INVALID_ARG);
    fx_vk_weight_free(vk, &dw);
    fx_vk_buf_free(vk, by), fx_vk_buf_free(vk, bb);
    vkt_close(vk);
}

/* ------------------------------------------------------------------------ */
/* conv2d                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct conv_case {
    const char *name;
    fx_conv2d_geom g;
    fx_dtype dt;
    fx_epilogue_mode mode;
} conv_case;

/* h, w, cin, cout, kh, kw, stride, pad t/l/b/r, upsample2x */
static const conv_case conv_cases[] = {
    {"3x3 s1 p1 cin 3", {5, 6, 3, 5, 3, 3, 1, 1, 1, 1, 1, 0}, FX_DTYPE_F32, FX_EPI_STORE},
    {"3x3 s1 p1 bf16", {7, 5, 8, 9, 3, 3, 1, 1, 1, 1, 1, 0}, FX_DTYPE_BF16, FX_EPI_ACCUMULATE},
    {"3x3 s2 pad r/b", {8, 7, 6, 5, 3, 3, 2, 0, 0, 1, 1, 0}, FX_DTYPE_BF16, FX_EPI_STORE},
    {"upsample2x + 3x3", {3, 4, 4, 3, 3, 3, 1, 1, 1, 1, 1, 1}, FX_DTYPE_F16, FX_EPI_STORE},
    {"1x1", {4, 5, 17, 6, 1, 1, 1, 0, 0, 0, 0, 0}, FX_DTYPE_BF16, FX_EPI_ACCUMULATE},
    {"asymmetric pads", {6, 6, 4, 5, 3, 3, 1, 2, 0, 0, 1, 0}, FX_DTYPE_F32, FX_EPI_STORE},
};

static void run_conv(fx_vk *vk, const conv_case *c, const char *label) {
    const fx_conv2d_geom *g = &c->g;
    int ho, wo;
    fx_conv2d_out_size(g, &ho, &wo);
    fx_test_rng r;
    fx_test_rng_seed(&r, (uint64_t)(g->h * 100 + g->cin));
    const int64_t k = (int64_t)g->cin * g->kh * g->kw;
    const size_t xn = (size_t)g->h * g->w * g->cin, yn = (size_t)ho * wo * g->cout;
    float *x = vkt_random(&r, xn, 1.0f), *y = vkt_random(&r, yn, 1.0f), *bias = vkt_random(&r, (size_t)g->cout, 1.0f);
    void *w = host_weight(&r, c->dt, g->cout, k, k);
    fx_weight hw = {.data = w, .dtype = c->dt, .n = g->cout, .k = k, .ld = k};
    fx_kctx kc;
    vkt_kctx(&kc);
    float *want = malloc(yn * 4);
    memcpy(want, y, yn * 4);
    fx_epilogue he = {c->mode, bias, NULL};
    fx_conv2d(&kc, g, x, &hw, &he, want, 0, 0);
    vkt_kctx_free(&kc);

    fx_err err = {0};
    fx_vk_weight dw;
    fx_vk_buf *bx = vkt_upload(vk, x, xn, "x"), *by = vkt_upload(vk, y, yn, "y");
    fx_vk_buf *bb = vkt_upload(vk, bias, (size_t)g->cout, "bias");
    if (bx && by && bb) {
        REQUIRE_MSG(fx_vk_conv_weight_upload(vk, g, &hw, "conv w", &dw, &err) == FLUX_OK, "%s", err.msg);
        fx_vk_epilogue e = {.mode = c->mode, .bias = {bb, 0}};
        flux_status st = fx_vk_conv2d(vk, g, (fx_vk_vec){bx, 0}, &dw, &e, (fx_vk_vec){by, 0}, &err);
        CHECK_MSG(st == FLUX_OK, "conv2d %s: %s", c->name, err.msg);
        float *got = st == FLUX_OK ? vkt_download(vk, by, 0, yn) : NULL;
        if (got) {
            char what[128];
            snprintf(what, sizeof what, "%s conv %s %s", label, c->name, fx_dtype_name(c->dt));
            vkt_check_close(what, got, want, yn, TOL);
        }
        free(got);
        fx_vk_weight_free(vk, &dw);
    }
    fx_vk_buf_free(vk, bx), fx_vk_buf_free(vk, by), fx_vk_buf_free(vk, bb);
    free(x), free(y), free(bias), free(w), free(want);
}

static void conv_cases_on(fx_vk_gemm_variant v, uint64_t max_binding, const char *label) {
    fx_vk *vk = vkt_open_limits(v, max_binding, 0);
    if (!vk) return;
    const size_t ncases = sizeof conv_cases / sizeof conv_cases[0];
    for (size_t i = 0; i < ncases; i++) run_conv(vk, &conv_cases[i], label);
    vkt_check_passes(vk, label, ncases, max_binding, ncases); /* some convs in strips */
    vkt_close(vk);
}

TEST(vk_conv2d_reg) { conv_cases_on(FX_VK_GEMM_REG, 0, "reg"); }
TEST(vk_conv2d_tiled) { conv_cases_on(FX_VK_GEMM_TILED, 0, "tiled"); }
/* 1 KiB bindings: row strips with their input windows, column passes. */
TEST(vk_conv2d_split_bindings) { conv_cases_on(FX_VK_GEMM_AUTO, 1024, "split"); }
