/*
 * test_vk_fp8.c — fx_vk_linear on fp8 weights (F8_E4M3, F8_E5M2 with a
 * per-tensor scale; README "fp8 checkpoints"), kept as bytes on the device
 * and decoded to f32(fp8)·scale inside the GEMM shaders:
 *   - the decoded values themselves: X = I makes Y = Wᵀ exactly, compared
 *     with the CPU's decoder (fx_dequantize_row, then the scale) for every
 *     one of the 256 codes, NaN codes (and E5M2 infinities) included: the
 *     vectorized (8 bytes a load) and element-by-element loads of both
 *     GEMM variants (a view starting at an odd byte for the latter);
 *   - against the CPU scalar kernel (fx_linear) on the same bytes: all 256
 *     codes present (the non-finite ones in the last row only, so the other
 *     columns stay finite), odd m, n and k (row tails inside the 16-byte
 *     padding), scaled and unscaled, every epilogue, both variants and
 *     2 KiB bindings. Tolerance as test_vk_gemm.c's for bf16 weights:
 *     max|y − y_cpu| <= 2e-5 · max(1, max|y_cpu|) (the weights are exact in
 *     f32 on both sides; only the summation order differs), a NaN or
 *     infinite y_cpu matched by its class;
 *   - the upload keeps one byte an element (rows padded to 16 bytes); a
 *     conv weight in fp8 is refused by name.
 */
#include "vk_test.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define TOL 2e-5

static int fp8_finite(fx_dtype dt, unsigned b) {
    return dt == FX_DTYPE_F8_E4M3 ? (b & 0x7F) != 0x7F : (b & 0x7C) != 0x7C;
}

/* A random finite code of dt. */
static uint8_t finite_code(fx_test_rng *r, fx_dtype dt) {
    for (;;) {
        unsigned b = (unsigned)(fx_test_rng_u64(r) >> 56);
        if (fp8_finite(dt, b)) return (uint8_t)b;
    }
}

/* [n, ld] fp8 bytes holding all 256 codes: the finite ones spread over
 * rows 0 .. n-2 in order, the non-finite ones at the start of row n-1,
 * random finite codes elsewhere (n·k must leave room: (n-1)·k >= 248). */
static uint8_t *all_codes(fx_test_rng *r, fx_dtype dt, int64_t n, int64_t k, int64_t ld) {
    uint8_t *w = calloc((size_t)(n * ld), 1);
    for (int64_t i = 0; i < n * ld; i++) w[i] = finite_code(r, dt);
    int64_t fin = 0, non = 0;
    for (unsigned c = 0; c < 256; c++) {
        if (fp8_finite(dt, c)) w[(fin / k) * ld + fin % k] = (uint8_t)c, fin++;
        else w[(n - 1) * ld + non++] = (uint8_t)c;
    }
    CHECK(fin <= (n - 1) * k && non <= k);
    return w;
}

typedef struct fp8_case {
    fx_dtype dt;
    int64_t m, n, k;
    float scale; /* 0: unscaled */
    fx_epilogue_mode mode;
    int bias;
} fp8_case;

static const fp8_case fp8_cases[] = {
    {FX_DTYPE_F8_E4M3, 5, 7, 45, 1.0f / 448, FX_EPI_STORE, 1},
    {FX_DTYPE_F8_E5M2, 5, 7, 45, 1.0f / 57344, FX_EPI_STORE, 0},
    {FX_DTYPE_F8_E4M3, 33, 37, 77, 0.0f, FX_EPI_GATED_ACCUMULATE, 1},
    {FX_DTYPE_F8_E5M2, 17, 23, 131, 3.0e-4f, FX_EPI_ACCUMULATE, 1},
    {FX_DTYPE_F8_E4M3, 3, 129, 3, 0.37f, FX_EPI_ACCUMULATE, 0},
    {FX_DTYPE_F8_E5M2, 9, 5, 257, 0.0f, FX_EPI_GATED_ACCUMULATE, 0},
    /* 128×128 tiles of the tiled variant; k not a multiple of the slab */
    {FX_DTYPE_F8_E4M3, 131, 133, 72, 2.5e-3f, FX_EPI_STORE, 1},
    {FX_DTYPE_F8_E5M2, 129, 130, 44, 1.5e-5f, FX_EPI_STORE, 0},
};

static void run_fp8(fx_vk *vk, const fp8_case *c, const char *label) {
    fx_test_rng r;
    fx_test_rng_seed(&r, (uint64_t)(c->dt * 7919 + c->m * 100 + c->n * 3 + c->k));
    const int64_t ld = c->k + 1; /* any ld on the host */
    uint8_t *w = all_codes(&r, c->dt, c->n, c->k, ld);
    fx_weight hw = {.data = w, .dtype = c->dt, .n = c->n, .k = c->k, .ld = ld, .scale = c->scale};
    vkt_linear_vs_cpu(vk, &r, c->m, &hw, c->mode, c->bias, TOL, label);
    /* on the device: one byte an element, rows padded to 16 bytes */
    fx_vk_weight dw;
    fx_err err = {0};
    if (fx_vk_weight_upload(vk, &hw, "f8w", &dw, &err) == FLUX_OK) {
        const int64_t dld = (c->k + 15) / 16 * 16;
        CHECK_MSG(dw.dtype == c->dt && dw.ld == dld && fx_vk_buf_bytes(dw.buf) == (uint64_t)(c->n * dld) &&
                      dw.scale == c->scale,
                  "%s: device layout ld %lld, %llu bytes", fx_dtype_name(c->dt), (long long)dw.ld,
                  (unsigned long long)fx_vk_buf_bytes(dw.buf));
        fx_vk_weight_free(vk, &dw);
    } else {
        CHECK_MSG(0, "upload: %s", err.msg);
    }
    free(w);
}

static void fp8_cases_on(fx_vk_gemm_variant v, uint64_t max_binding, const char *label) {
    fx_vk *vk = vkt_open_limits(v, max_binding, 0);
    if (!vk) return;
    const size_t ncases = sizeof fp8_cases / sizeof fp8_cases[0];
    for (size_t i = 0; i < ncases; i++) run_fp8(vk, &fp8_cases[i], label);
    vkt_check_passes(vk, label, ncases, max_binding, 2 * ncases);
    vkt_close(vk);
}

TEST(vk_linear_fp8_reg) { fp8_cases_on(FX_VK_GEMM_REG, 0, "reg"); }
TEST(vk_linear_fp8_tiled) { fp8_cases_on(FX_VK_GEMM_TILED, 0, "tiled"); }
/* 2 KiB bindings: a few rows of W, X and Y per pass. */
TEST(vk_linear_fp8_split_bindings) { fp8_cases_on(FX_VK_GEMM_AUTO, 2048, "split"); }

/* Y = I·Wᵀ for W [256, K]: row c holds code c at column c mod K and finite
 * codes elsewhere, so column c of Y is code c's value (NaN / inf codes: a
 * NaN or that infinity, as the CPU's sum). A view of the same weight from
 * byte 1 (rows at odd bytes) takes the element-by-element loads. */
static void fp8_exact_on(fx_vk_gemm_variant v, const char *label) {
    fx_vk *vk = vkt_open_limits(v, 0, 0);
    if (!vk) return;
    enum { K = 24, N = 256 }; /* K: one whole 16-slab of the tiled variant and a partial one */
    float *eye = calloc((size_t)K * K, sizeof *eye);
    for (int i = 0; i < K; i++) eye[i * K + i] = 1.0f;
    fx_vk_buf *bx = vkt_upload(vk, eye, (size_t)K * K, "I"), *by = vkt_upload(vk, NULL, (size_t)K * N, "y");
    static const float scales[2] = {0.0f, 7.0e-3f};
    for (int t = FX_DTYPE_F8_E4M3; t <= FX_DTYPE_F8_E5M2 && bx && by; t++) {
        const fx_dtype dt = (fx_dtype)t;
        fx_test_rng r;
        fx_test_rng_seed(&r, (uint64_t)(t * 131 + 17));
        uint8_t w[N][K];
        for (int c = 0; c < N; c++)
            for (int j = 0; j < K; j++) w[c][j] = j == c % K ? (uint8_t)c : finite_code(&r, dt);
        for (int s = 0; s < 2; s++) {
            /* the CPU's values: its decoder, then the scale */
            static float val[N][K];
            for (int c = 0; c < N; c++) {
                fx_dequantize_row(dt, w[c], K, val[c]);
                fx_weight_scale_row(scales[s], K, val[c]);
            }
            fx_weight hw = {.data = w, .dtype = dt, .n = N, .k = K, .ld = K, .scale = scales[s]};
            fx_vk_weight dw;
            fx_err err = {0};
            if (fx_vk_weight_upload(vk, &hw, "f8w", &dw, &err) != FLUX_OK) {
                fx_test_fail(__FILE__, __LINE__, "%s %s: upload: %s", label, fx_dtype_name(dt), err.msg);
                continue;
            }
            for (int view = 0; view < 2; view++) {
                /* view 1: rows from byte 1, columns 1 .. K-1, rows 0 .. N-2 */
                fx_vk_weight vw = dw;
                if (view) vw.off = 1, vw.k = K - 1, vw.n = N - 1;
                const int64_t m = vw.k, n = vw.n;
                float *got = NULL;
                if (fx_vk_linear(vk, m, (fx_vk_mat){bx, 0, K}, &vw, (fx_vk_mat){by, 0, n}, NULL, &err) != FLUX_OK)
                    fx_test_fail(__FILE__, __LINE__, "%s %s: %s", label, fx_dtype_name(dt), err.msg);
                else
                    got = vkt_download(vk, by, 0, (size_t)(m * n));
                int bad = 0;
                for (int64_t i = 0; got && i < m; i++)
                    for (int64_t c = 0; c < n; c++) {
                        float want = 0.0f; /* the f32 sum of 1·w and 0·w */
                        for (int64_t j = 0; j < m; j++) want += (i == j ? 1.0f : 0.0f) * val[c][j + view];
                        const float y = got[i * n + c];
                        if (isnan(want) ? !isnan(y) : y != want) {
                            if (bad++ < 3)
                                printf("    %s %s view %d: y[%lld, %lld] (code 0x%02x) device %.9g, CPU %.9g\n",
                                       label, fx_dtype_name(dt), view, (long long)i, (long long)c,
                                       w[c][i + view], (double)y, (double)want);
                        }
                    }
                CHECK_MSG(got && bad == 0, "%s %s scale %g view %d: %d values differ from the CPU's decoding",
                          label, fx_dtype_name(dt), (double)scales[s], view, bad);
                free(got);
            }
            fx_vk_weight_free(vk, &dw);
        }
    }
    fx_vk_buf_free(vk, bx), fx_vk_buf_free(vk, by);
    free(eye);
    vkt_close(vk);
}

TEST(vk_fp8_decode_bitexact_reg) { fp8_exact_on(FX_VK_GEMM_REG, "reg"); }
TEST(vk_fp8_decode_bitexact_tiled) { fp8_exact_on(FX_VK_GEMM_TILED, "tiled"); }

/* fp8 is read by linear layers only: a conv weight in fp8 is refused by name. */
TEST(vk_fp8_conv_weight_is_refused) {
    fx_vk *vk = vkt_open(NULL);
    if (!vk) return;
    uint8_t f8[4 * 32] = {0};
    fx_conv2d_geom g = {.h = 4, .w = 4, .cin = 32, .cout = 4, .kh = 1, .kw = 1, .stride = 1};
    for (int t = FX_DTYPE_F8_E4M3; t <= FX_DTYPE_F8_E5M2; t++) {
        fx_weight cw = {.data = f8, .dtype = (fx_dtype)t, .n = 4, .k = 32, .ld = 32, .scale = 0.5f};
        fx_vk_weight dw;
        fx_err err = {0};
        CHECK_EQ_INT(fx_vk_conv_weight_upload(vk, &g, &cw, "conv.f8", &dw, &err), FLUX_ERR_UNSUPPORTED);
        CHECK_MSG(strstr(err.msg, "conv.f8") && strstr(err.msg, fx_dtype_name((fx_dtype)t)), "error: %s", err.msg);
    }
    vkt_close(vk);
}
