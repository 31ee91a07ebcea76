/*
 * test_vk_quant.c — fx_vk_linear on GGUF block weights (every block type
 * the CPU reads: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K,
 * Q6_K, IQ4_NL, IQ4_XS, uploaded as stored, dequantized inside the GEMM
 * shaders):
 *   - the dequantized values themselves, bit for bit: X = I [k, k] makes
 *     Y = Wᵀ exactly (one product by 1, the rest by 0), compared with
 *     fx_dequantize_row on random block bytes (every scale, nibble and
 *     high bit pattern; f16 scales random finite, subnormals included);
 *   - against the CPU scalar kernel (fx_linear) on the same blocks, both
 *     GEMM variants, every epilogue, odd m and n, several blocks per row
 *     (k multiples of the block only: a block never straddles rows);
 *   - an unknown dtype (and F8_E8M0) is still refused by name at upload;
 *     F8_E4M3 / F8_E5M2 are accepted (test_vk_fp8.c).
 *
 * Tolerance as test_vk_gemm.c: max|y − y_cpu| <= 2e-5 · max(1, max|y_cpu|).
 * Dequantization is exact in f32 on both sides (the same operations); only
 * the summation order of the k products differs.
 */
#include "vk_test.h"

#include <stdio.h>
#include <string.h>

#define TOL 2e-5

typedef struct quant_case {
    fx_dtype dt;
    int64_t m, n, k;
    fx_epilogue_mode mode;
    int bias;
} quant_case;

static const quant_case quant_cases[] = {
    {FX_DTYPE_Q8_0, 5, 7, 256, FX_EPI_STORE, 0},        {FX_DTYPE_Q8_0, 9, 33, 512, FX_EPI_GATED_ACCUMULATE, 1},
    {FX_DTYPE_Q4_0, 3, 17, 256, FX_EPI_STORE, 1},       {FX_DTYPE_Q4_0, 11, 5, 512, FX_EPI_ACCUMULATE, 0},
    {FX_DTYPE_Q4_1, 6, 13, 96, FX_EPI_STORE, 1},        {FX_DTYPE_Q4_1, 1, 5, 512, FX_EPI_GATED_ACCUMULATE, 0},
    {FX_DTYPE_Q5_0, 7, 3, 160, FX_EPI_ACCUMULATE, 0},   {FX_DTYPE_Q5_0, 10, 18, 256, FX_EPI_STORE, 1},
    {FX_DTYPE_Q5_1, 4, 9, 64, FX_EPI_GATED_ACCUMULATE, 1}, {FX_DTYPE_Q5_1, 13, 2, 288, FX_EPI_STORE, 0},
    {FX_DTYPE_Q2_K, 3, 11, 256, FX_EPI_STORE, 0},       {FX_DTYPE_Q2_K, 9, 6, 768, FX_EPI_ACCUMULATE, 1},
    {FX_DTYPE_Q3_K, 2, 7, 512, FX_EPI_GATED_ACCUMULATE, 1}, {FX_DTYPE_Q3_K, 11, 14, 256, FX_EPI_STORE, 0},
    {FX_DTYPE_Q4_K, 7, 9, 256, FX_EPI_STORE, 0},        {FX_DTYPE_Q4_K, 13, 31, 768, FX_EPI_GATED_ACCUMULATE, 1},
    {FX_DTYPE_Q5_K, 1, 3, 256, FX_EPI_ACCUMULATE, 1},   {FX_DTYPE_Q5_K, 9, 21, 512, FX_EPI_STORE, 0},
    {FX_DTYPE_Q6_K, 5, 11, 256, FX_EPI_STORE, 1},       {FX_DTYPE_Q6_K, 15, 19, 512, FX_EPI_GATED_ACCUMULATE, 0},
    {FX_DTYPE_IQ4_NL, 5, 7, 128, FX_EPI_STORE, 1},      {FX_DTYPE_IQ4_NL, 9, 3, 32, FX_EPI_ACCUMULATE, 0},
    {FX_DTYPE_IQ4_XS, 3, 10, 512, FX_EPI_GATED_ACCUMULATE, 0}, {FX_DTYPE_IQ4_XS, 8, 5, 256, FX_EPI_STORE, 1},
};

/* Byte offsets of the f16 fields (d, m / dmin) inside one block, -1 ended. */
static const int f16_fields[FX_DTYPE_COUNT][3] = {
    [FX_DTYPE_Q8_0] = {0, -1},    [FX_DTYPE_Q4_0] = {0, -1},    [FX_DTYPE_Q4_1] = {0, 2, -1},
    [FX_DTYPE_Q5_0] = {0, -1},    [FX_DTYPE_Q5_1] = {0, 2, -1}, [FX_DTYPE_Q2_K] = {80, 82, -1},
    [FX_DTYPE_Q3_K] = {108, -1},  [FX_DTYPE_Q4_K] = {0, 2, -1}, [FX_DTYPE_Q5_K] = {0, 2, -1},
    [FX_DTYPE_Q6_K] = {208, -1},  [FX_DTYPE_IQ4_NL] = {0, -1},  [FX_DTYPE_IQ4_XS] = {0, -1},
};

/* [n, k] random block bytes whose f16 fields are finite: magnitudes below
 * 2, either sign, subnormals included. */
static void *random_blocks(fx_test_rng *r, fx_dtype dt, int64_t n, int64_t k) {
    const int64_t bytes = n * fx_dtype_row_bytes(dt, k), bb = (int64_t)fx_dtype_block_bytes(dt);
    uint8_t *w = malloc((size_t)bytes);
    for (int64_t i = 0; i < bytes; i++) w[i] = (uint8_t)(fx_test_rng_u64(r) >> 56);
    for (int64_t b = 0; b < bytes; b += bb)
        for (const int *f = f16_fields[dt]; *f >= 0; f++) w[b + *f + 1] &= 0xBF; /* exponent <= 15 */
    return w;
}

/* [n, k] random weights quantized row by row with the reference quantizer
 * (random block bytes for the IQ4 types, which it does not produce). */
static void *block_weight(fx_test_rng *r, fx_dtype dt, int64_t n, int64_t k) {
    if (!fx_dtype_can_quantize(dt)) {
        uint8_t *w = random_blocks(r, dt, n, k);
        const int64_t bytes = n * fx_dtype_row_bytes(dt, k), bb = (int64_t)fx_dtype_block_bytes(dt);
        for (int64_t b = 0; b < bytes; b += bb) w[b + 1] &= 0x9F; /* d (at 0) below 2^-7 */
        return w;
    }
    const int64_t rb = fx_dtype_row_bytes(dt, k);
    uint8_t *w = malloc((size_t)(n * rb));
    float *row = malloc((size_t)k * 4);
    for (int64_t i = 0; i < n; i++) {
        for (int64_t j = 0; j < k; j++) row[j] = 0.5f * fx_test_rng_uniform(r);
        fx_quantize_row(dt, row, k, w + i * rb);
    }
    free(row);
    return w;
}

static void run_quant(fx_vk *vk, const quant_case *c, const char *label) {
    fx_test_rng r;
    fx_test_rng_seed(&r, (uint64_t)(c->dt * 7919 + c->m * 100 + c->n));
    void *w = block_weight(&r, c->dt, c->n, c->k);
    fx_weight hw = {.data = w, .dtype = c->dt, .n = c->n, .k = c->k, .ld = c->k};
    vkt_linear_vs_cpu(vk, &r, c->m, &hw, c->mode, c->bias, TOL, label);
    /* on the device the blocks are kept as stored: rows of their bytes */
    fx_vk_weight dw;
    fx_err err = {0};
    if (fx_vk_weight_upload(vk, &hw, "qw", &dw, &err) == FLUX_OK) {
        CHECK(dw.dtype == c->dt && dw.ld == fx_dtype_row_bytes(c->dt, c->k) &&
              fx_vk_buf_bytes(dw.buf) >= (uint64_t)(c->n * dw.ld));
        fx_vk_weight_free(vk, &dw);
    } else {
        CHECK_MSG(0, "upload: %s", err.msg);
    }
    free(w);
}

/* Every case (step 1), or one per block type (step 2: lavapipe is slow). */
static void quant_cases_on(fx_vk_gemm_variant v, uint64_t max_binding, size_t step, const char *label) {
    fx_vk *vk = vkt_open_limits(v, max_binding, 0);
    if (!vk) return;
    const size_t ncases = sizeof quant_cases / sizeof quant_cases[0];
    for (size_t i = 0; i < ncases; i += step) run_quant(vk, &quant_cases[i], label);
    vkt_check_passes(vk, label, ncases / step, max_binding, ncases / step);
    vkt_close(vk);
}

TEST(vk_linear_blocks_reg) { quant_cases_on(FX_VK_GEMM_REG, 0, 1, "reg"); }
TEST(vk_linear_blocks_tiled) { quant_cases_on(FX_VK_GEMM_TILED, 0, 2, "tiled"); }
/* 4 KiB bindings: a few block rows per pass, windows starting mid-word
 * (rows of 20, 22, 84, 110, 210 ... bytes). */
TEST(vk_linear_blocks_split_bindings) { quant_cases_on(FX_VK_GEMM_AUTO, 4096, 2, "split"); }

/* Y = I·Wᵀ on the device equals fx_dequantize_row bit for bit, every type. */
static void dequant_exact_on(fx_vk_gemm_variant v, const char *label) {
    fx_vk *vk = vkt_open_limits(v, 0, 0);
    if (!vk) return;
    enum { K = 256, N = 3 };
    float *eye = calloc((size_t)K * K, sizeof *eye);
    for (int i = 0; i < K; i++) eye[i * K + i] = 1.0f;
    fx_vk_buf *bx = vkt_upload(vk, eye, (size_t)K * K, "I"), *by = vkt_upload(vk, NULL, (size_t)K * N, "y");
    for (int t = FX_DTYPE_Q8_0; t < FX_DTYPE_COUNT && bx && by; t++) {
        /* listed types without kernels; fp8 (no blocks): test_vk_fp8.c; NVFP4's
         * F4_E2M1 (no GGUF type): refused, vk_unknown_dtype_is_refused */
        if (!fx_dtype_is_weight((fx_dtype)t) || !fx_dtype_is_block((fx_dtype)t) || fx_dtype_ggml_id((fx_dtype)t) < 0)
            continue;
        fx_test_rng r;
        fx_test_rng_seed(&r, (uint64_t)(t * 131 + 17));
        void *w = random_blocks(&r, (fx_dtype)t, N, K);
        float want[N][K];
        for (int j = 0; j < N; j++)
            fx_dequantize_row((fx_dtype)t, (const uint8_t *)w + j * fx_dtype_row_bytes((fx_dtype)t, K), K, want[j]);
        fx_weight hw = {.data = w, .dtype = (fx_dtype)t, .n = N, .k = K, .ld = K};
        fx_vk_weight dw;
        fx_err err = {0};
        float *got = NULL;
        if (fx_vk_weight_upload(vk, &hw, "qw", &dw, &err) != FLUX_OK ||
            fx_vk_linear(vk, K, (fx_vk_mat){bx, 0, K}, &dw, (fx_vk_mat){by, 0, N}, NULL, &err) != FLUX_OK)
            fx_test_fail(__FILE__, __LINE__, "%s %s: %s", label, fx_dtype_name((fx_dtype)t), err.msg);
        else
            got = vkt_download(vk, by, 0, (size_t)K * N);
        int bad = 0;
        for (int i = 0; got && i < K; i++)
            for (int j = 0; j < N; j++)
                if (got[i * N + j] != want[j][i] && bad++ < 3)
                    printf("    %s %s: element (%d, %d): device %.9g, CPU %.9g\n", label, fx_dtype_name((fx_dtype)t), j,
                           i, (double)got[i * N + j], (double)want[j][i]);
        CHECK_MSG(got && bad == 0, "%s %s: %d dequantized values differ from the CPU reference", label,
                  fx_dtype_name((fx_dtype)t), bad);
        free(got);
        if (dw.buf) fx_vk_weight_free(vk, &dw);
        free(w);
    }
    fx_vk_buf_free(vk, bx), fx_vk_buf_free(vk, by);
    free(eye);
    vkt_close(vk);
}

/* One variant: both read the weights through the same w_block(). */
TEST(vk_dequant_bitexact) { dequant_exact_on(FX_VK_GEMM_AUTO, "auto"); }

/* Every block type and fp8 is read on the device; a dtype the device does
 * not know is refused by name at upload, and a block-typed conv weight too. */
TEST(vk_unknown_dtype_is_refused) {
    fx_vk *vk = vkt_open(NULL);
    if (!vk) return;
    float w[3 * 64] = {0};
    fx_weight hw = {.data = w, .dtype = FX_DTYPE_COUNT, .n = 3, .k = 64, .ld = 64};
    fx_vk_weight dw;
    fx_err err = {0};
    CHECK_EQ_INT(fx_vk_weight_upload(vk, &hw, "blk.odd", &dw, &err), FLUX_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "blk.odd") && strstr(err.msg, "--backend cpu"), "error: %s", err.msg);
    /* fp8 weights (per-tensor scales) are accepted, kept one byte an
     * element (test_vk_fp8.c); the F8_E8M0 scale type is no weight */
    uint8_t f8[3 * 64] = {0};
    for (int t = FX_DTYPE_F8_E4M3; t <= FX_DTYPE_F8_E5M2; t++) {
        fx_weight fw = {.data = f8, .dtype = (fx_dtype)t, .n = 3, .k = 64, .ld = 64, .scale = 0.25f};
        err = (fx_err){0};
        CHECK_MSG(fx_vk_weight_upload(vk, &fw, "f8.w", &dw, &err) == FLUX_OK, "%s: %s", fx_dtype_name((fx_dtype)t),
                  err.msg);
        if (dw.buf) {
            CHECK(dw.dtype == (fx_dtype)t && dw.scale == 0.25f && fx_vk_buf_bytes(dw.buf) == 3 * 64);
            fx_vk_weight_free(vk, &dw);
        }
    }
    /* NVFP4's element pairs and I8 codes: refused by name at upload (flux_load
     * refuses such files before: test_vk_quant_layouts.c) */
    static const fx_dtype refused[] = {FX_DTYPE_F4_E2M1, FX_DTYPE_I8};
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        fx_weight rw = {.data = f8, .dtype = refused[i], .n = 3, .k = 64, .ld = 64};
        err = (fx_err){0};
        CHECK_EQ_INT(fx_vk_weight_upload(vk, &rw, "odd.w", &dw, &err), FLUX_ERR_UNSUPPORTED);
        CHECK_MSG(strstr(err.msg, "odd.w") && strstr(err.msg, fx_dtype_name(refused[i])), "error: %s", err.msg);
    }
    fx_weight e8 = {.data = f8, .dtype = FX_DTYPE_F8_E8M0, .n = 3, .k = 64, .ld = 64};
    err = (fx_err){0};
    CHECK_EQ_INT(fx_vk_weight_upload(vk, &e8, "e8.w", &dw, &err), FLUX_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "e8.w") && strstr(err.msg, "F8_E8M0") && strstr(err.msg, "--backend cpu"), "error: %s",
              err.msg);
    fx_test_rng r;
    fx_test_rng_seed(&r, 5);
    void *q = block_weight(&r, FX_DTYPE_Q4_1, 4, 32);
    fx_weight cw = {.data = q, .dtype = FX_DTYPE_Q4_1, .n = 4, .k = 32, .ld = 32};
    fx_conv2d_geom g = {.h = 4, .w = 4, .cin = 32, .cout = 4, .kh = 1, .kw = 1, .stride = 1};
    err = (fx_err){0};
    CHECK_EQ_INT(fx_vk_conv_weight_upload(vk, &g, &cw, "conv.q41", &dw, &err), FLUX_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "Q4_1") && strstr(err.msg, "conv.q41"), "error: %s", err.msg);
    free(q);
    vkt_close(vk);
}
