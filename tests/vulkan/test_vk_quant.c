/*
 * test_vk_quant.c — fx_vk_linear on GGUF block weights (Q8_0, Q4_0, Q4_K,
 * Q5_K, Q6_K uploaded as stored, dequantized inside the GEMM shaders)
 * against the CPU scalar kernel (fx_linear) on the same blocks, both GEMM
 * variants, every epilogue, odd m and n, k multiples of 256; and the clear
 * refusal of a block type the device does not read.
 *
 * Tolerance as test_vk_gemm.c: max|y − y_cpu| <= 2e-5 · max(1, max|y_cpu|).
 * Dequantization is exact in f32 on both sides (the same operations); only
 * the summation order of the k products differs.
 */
#include "vk_test.h"

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
    {FX_DTYPE_Q4_K, 7, 9, 256, FX_EPI_STORE, 0},        {FX_DTYPE_Q4_K, 13, 31, 768, FX_EPI_GATED_ACCUMULATE, 1},
    {FX_DTYPE_Q5_K, 1, 3, 256, FX_EPI_ACCUMULATE, 1},   {FX_DTYPE_Q5_K, 9, 21, 512, FX_EPI_STORE, 0},
    {FX_DTYPE_Q6_K, 5, 11, 256, FX_EPI_STORE, 1},       {FX_DTYPE_Q6_K, 15, 19, 512, FX_EPI_GATED_ACCUMULATE, 0},
};

/* [n, k] random weights quantized row by row with the reference quantizer. */
static void *block_weight(fx_test_rng *r, fx_dtype dt, int64_t n, int64_t k) {
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

static void quant_cases_on(fx_vk_gemm_variant v, uint64_t max_binding, const char *label) {
    fx_vk *vk = vkt_open_limits(v, max_binding, 0);
    if (!vk) return;
    const size_t ncases = sizeof quant_cases / sizeof quant_cases[0];
    for (size_t i = 0; i < ncases; i++) run_quant(vk, &quant_cases[i], label);
    vkt_check_passes(vk, label, ncases, max_binding, ncases);
    vkt_close(vk);
}

TEST(vk_linear_blocks_reg) { quant_cases_on(FX_VK_GEMM_REG, 0, "reg"); }
TEST(vk_linear_blocks_tiled) { quant_cases_on(FX_VK_GEMM_TILED, 0, "tiled"); }
/* 4 KiB bindings: a few block rows per pass, windows starting mid-word
 * (Q6_K rows are 210 bytes). */
TEST(vk_linear_blocks_split_bindings) { quant_cases_on(FX_VK_GEMM_AUTO, 4096, "split"); }

/* A block type the shaders do not decode is refused by name at upload. */
TEST(vk_block_type_unsupported_is_refused) {
    fx_vk *vk = vkt_open(NULL);
    if (!vk) return;
    fx_test_rng r;
    fx_test_rng_seed(&r, 5);
    void *w = block_weight(&r, FX_DTYPE_Q4_1, 3, 64);
    fx_weight hw = {.data = w, .dtype = FX_DTYPE_Q4_1, .n = 3, .k = 64, .ld = 64};
    fx_vk_weight dw;
    fx_err err = {0};
    CHECK_EQ_INT(fx_vk_weight_upload(vk, &hw, "blk.q41", &dw, &err), FLUX_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "Q4_1") && strstr(err.msg, "blk.q41") && strstr(err.msg, "--backend cpu"), "error: %s",
              err.msg);
    free(w);
    vkt_close(vk);
}
