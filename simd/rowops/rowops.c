/*
 * rowops.c — public row and elementwise operations (kernels.h): dispatch to
 * the context's row table and OpenMP over rows. Each row is computed by one
 * thread with the same code whatever the split, so results are
 * bit-identical for any thread count.
 */
#include "rowops.h"

void fx_rmsnorm(const fx_kctx *kc, int64_t rows, int64_t cols, const float *x, int64_t ldx,
                const float *w, float eps, float *y, int64_t ldy) {
    if (rows <= 0 || cols <= 0) return;
    const struct fx_row_kernels *rk = fx_row_table(kc);
#pragma omp parallel for schedule(static) num_threads(fx_row_threads(kc, rows * cols, FX_ROW_PARALLEL_MIN))
    for (int64_t r = 0; r < rows; r++) rk->rmsnorm(cols, x + r * ldx, w, eps, y + r * ldy);
}

void fx_layernorm_modulate(const fx_kctx *kc, int64_t rows, int64_t cols, const float *x,
                           int64_t ldx, const float *shift, const float *scale, float eps,
                           float *y, int64_t ldy) {
    if (rows <= 0 || cols <= 0) return;
    const struct fx_row_kernels *rk = fx_row_table(kc);
#pragma omp parallel for schedule(static) num_threads(fx_row_threads(kc, rows * cols, FX_ROW_PARALLEL_MIN))
    for (int64_t r = 0; r < rows; r++)
        rk->layernorm_modulate(cols, x + r * ldx, shift, scale, eps, y + r * ldy);
}

/* Contiguous elementwise work is cut into fixed spans of this many floats. */
#define SPAN 8192

void fx_silu(const fx_kctx *kc, int64_t n, float *x) {
    if (n <= 0) return;
    const struct fx_row_kernels *rk = fx_row_table(kc);
    int64_t spans = (n + SPAN - 1) / SPAN;
#pragma omp parallel for schedule(static) num_threads(fx_row_threads(kc, n, FX_ROW_PARALLEL_MIN))
    for (int64_t s = 0; s < spans; s++) {
        int64_t i0 = s * SPAN, len = n - i0 < SPAN ? n - i0 : SPAN;
        rk->silu(len, x + i0, x + i0);
    }
}

void fx_swiglu(const fx_kctx *kc, int64_t rows, int64_t cols, const float *gate, int64_t ldg,
               const float *up, int64_t ldu, float *out, int64_t ldo) {
    if (rows <= 0 || cols <= 0) return;
    const struct fx_row_kernels *rk = fx_row_table(kc);
#pragma omp parallel for schedule(static) num_threads(fx_row_threads(kc, rows * cols, FX_ROW_PARALLEL_MIN))
    for (int64_t r = 0; r < rows; r++)
        rk->swiglu(cols, gate + r * ldg, up + r * ldu, out + r * ldo);
}

void fx_gated_add(const fx_kctx *kc, int64_t rows, int64_t cols, float *y, int64_t ldy,
                  const float *gate, const float *x, int64_t ldx) {
    if (rows <= 0 || cols <= 0) return;
    const struct fx_row_kernels *rk = fx_row_table(kc);
#pragma omp parallel for schedule(static) num_threads(fx_row_threads(kc, rows * cols, FX_ROW_PARALLEL_MIN))
    for (int64_t r = 0; r < rows; r++) rk->gated_add(cols, y + r * ldy, gate, x + r * ldx);
}

void fx_softmax_rows(const fx_kctx *kc, int64_t rows, int64_t cols, float *x, int64_t ldx) {
    if (rows <= 0 || cols <= 0) return;
    const struct fx_row_kernels *rk = fx_row_table(kc);
#pragma omp parallel for schedule(static) num_threads(fx_row_threads(kc, rows * cols, FX_ROW_PARALLEL_MIN))
    for (int64_t r = 0; r < rows; r++) rk->softmax(cols, x + r * ldx);
}
