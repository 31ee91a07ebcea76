/*
 * test_kernel_side_scales.c — weights with side scales (fx_weight.scales:
 * fp8 per output row, 128x128 blocks, MXFP8's 1x32, NVFP4's E2M1 with 1x16,
 * int8 per row) through fx_linear on every ISA table: equal bit for bit to
 * the same weights given as F32 (BF16 on the bf16-dot paths) values
 * f32(code)·scale, computed here from the definition of the grid. Shapes
 * with k beyond the K block (the expander finds a panel's columns from its
 * place in the weight) and row slices (fx_weight_rows keeps the grid's
 * place).
 */
#include "tests/test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_isas.h"
#include "simd/common/table.h"
#include "simd/gemm/gemm.h"
#include "simd/quant/quant.h"

typedef struct layout {
    const char *name;
    fx_dtype dtype;
    int64_t rows, cols; /* a scale's block; cols 0: the whole row */
} layout;

static const layout layouts[] = {
    {"fp8 e4m3 per row", FX_DTYPE_F8_E4M3, 1, 0},   {"fp8 e5m2 128x128", FX_DTYPE_F8_E5M2, 128, 128},
    {"mxfp8 1x32", FX_DTYPE_F8_E4M3, 1, 32},        {"nvfp4 e2m1 1x16", FX_DTYPE_F4_E2M1, 1, 16},
    {"int8 per row", FX_DTYPE_I8, 1, 0},
};

static int bf16_target(const fx_kernels *kt) {
    return fx_gemm_expand_target(kt->gemm ? kt->gemm : &fx_gemm_scalar) == FX_DTYPE_BF16;
}

/* A random code byte of t that is a finite value. */
static uint8_t code(fx_test_rng *r, fx_dtype t) {
    for (;;) {
        const uint8_t b = (uint8_t)(fx_test_rng_u64(r) >> 56);
        if (t == FX_DTYPE_F8_E4M3 && (b & 0x7F) == 0x7F) continue;
        if (t == FX_DTYPE_F8_E5M2 && (b & 0x7F) >= 0x7C) continue;
        return b;
    }
}

TEST(kernel_side_scales_linear_equals_decoded) {
    kt_isas isas = kt_isas_list("kernel_side_scales_linear_equals_decoded", 1);
    fx_test_rng r;
    fx_test_rng_seed(&r, 303);
    static const int64_t shapes[][3] = {{1, 37, 512}, {7, 45, 512}, {29, 70, 1792}, {64, 19, 256}};
    int64_t checked = 0;
    for (int i = 0; i < isas.n; i++)
        for (size_t l = 0; l < sizeof layouts / sizeof *layouts; l++)
            for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
                if (KT_SMALL && s >= 2) continue;
                const layout *L = &layouts[l];
                const int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
                const int64_t br = L->rows, bc = L->cols ? L->cols : k, ld = (k + bc - 1) / bc;
                const int64_t grid = (n + br - 1) / br * ld, rb = fx_dtype_row_bytes(L->dtype, k);
                uint8_t *wq = malloc((size_t)(n * rb));
                float *g = kt_alloc((size_t)grid), *wf = kt_alloc((size_t)(n * k)), *row = kt_alloc((size_t)k);
                float *x = kt_alloc((size_t)(m * k)), *ya = kt_alloc((size_t)(m * n)), *yb = kt_alloc((size_t)(m * n));
                uint16_t *wb = malloc((size_t)(n * k) * 2);
                for (int64_t q = 0; q < grid; q++) /* MX: powers of two; the others: any positive scale */
                    g[q] = L->cols == 32 ? ldexpf(1.0f, (int)(fx_test_rng_u64(&r) % 20) - 14)
                                         : 1e-3f + (float)(fx_test_rng_u64(&r) % 1000) * 1e-4f;
                for (int64_t q = 0; q < n * rb; q++) wq[q] = code(&r, L->dtype);
                for (int64_t j = 0; j < n; j++) { /* the reference: f32(code) · s[(j / br)·ld + c / bc] */
                    fx_dequantize_row(L->dtype, wq + j * rb, k, row);
                    for (int64_t c = 0; c < k; c++) {
                        wf[j * k + c] = row[c] * g[j / br * ld + c / bc];
                        wb[j * k + c] = fx_f32_to_bf16_bits(wf[j * k + c]);
                    }
                }
                fx_test_fill_uniform(&r, x, (size_t)(m * k), 1.0f);
                const fx_weight_scales gs = {g, br, bc, ld};
                const fx_weight w = {.data = wq, .dtype = L->dtype, .n = n, .k = k, .ld = k, .scales = &gs};
                const int bf = bf16_target(isas.k[i]);
                const fx_weight wref = {.data = bf ? (const void *)wb : (const void *)wf,
                                        .dtype = bf ? FX_DTYPE_BF16 : FX_DTYPE_F32, .n = n, .k = k, .ld = k};
                fx_kctx kc = kt_ctx(isas.k[i], 1 + (int)(s % 2));
                kc.int8 = 1; /* side-scaled weights never run W8A8 without a form */
                for (int64_t r0 = 0; r0 <= 5; r0 += 5) { /* the whole weight, then a row slice */
                    const fx_weight a = fx_weight_rows(&w, r0, n - r0), b = fx_weight_rows(&wref, r0, n - r0);
                    memset(ya, 0, (size_t)(m * n) * 4), memset(yb, 0, (size_t)(m * n) * 4);
                    fx_linear(&kc, m, x, k, &a, ya, n, NULL);
                    fx_linear(&kc, m, x, k, &b, yb, n, NULL);
                    const long at = kt_bitdiff(ya, yb, (size_t)(m * n), 4);
                    CHECK_MSG(at < 0, "%s %s m=%lld n=%lld k=%lld rows from %lld: y[%ld] %.9g vs %.9g", kt_name(isas.k[i]),
                              L->name, (long long)m, (long long)n, (long long)k, (long long)r0, at,
                              at < 0 ? 0.0 : ya[at], at < 0 ? 0.0 : yb[at]);
                    checked++;
                }
                kt_ctx_free(&kc);
                free(wq), free(g), free(wf), free(row), free(x), free(ya), free(yb), free(wb);
            }
    printf("    %lld side-scaled products equal their decoded weights' bit for bit\n", (long long)checked);
}
