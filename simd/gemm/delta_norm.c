/*
 * delta_norm.c — the row norms ‖W_j + s·ΔW_j‖ of a layer and one of its
 * terms (fx_delta_row_norms, kernels.h): what DoRA divides its magnitudes
 * by, computed once when an adapter is attached or its strength changes.
 *
 * Rows go in chunks of CHUNK: the term's ΔW rows of the chunk are made in
 * f32 (LOWRANK: B rows [c, r] · A through the GEMM with Aᵀ [k, r] as an f32
 * weight; DENSE: the stored rows; KRON: W1[i1, j1]·W2[i2, j2] entry by
 * entry), then each W row is dequantized on its own (fx_dequantize_row:
 * mapped bf16 or quantized blocks are read in place, never copied whole;
 * fp8 times its scale, the values the GEMM multiplies)
 * and Σ (w + s·δ)² is summed in double, one row per iteration of a
 * parallel loop: the same sums for any thread count.
 */
#include "gemm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { CHUNK = 64 };

/* Row i of a factor (f32/f16/bf16) as f32. */
static void factor_row(const fx_weight *f, int64_t i, float *out) {
    fx_dequantize_row(f->dtype, (const char *)f->data + fx_dtype_row_bytes(f->dtype, i * f->ld), f->k, out);
}

/* ΔW rows [j0, j0 + c) of d into dw [c, k]. at: Aᵀ [k, r] (LOWRANK), w2:
 * W2 [k2, n2] (KRON), tmp: room for max(r, m1) floats per row. */
static void delta_rows(const fx_kctx *kc, const fx_delta *d, int64_t k, int64_t j0, int64_t c, const fx_weight *at,
                       const float *w2, float *tmp, float *dw) {
    switch (d->kind) {
    case FX_DELTA_LOWRANK: {
        const int64_t r = d->a.n;
        for (int64_t i = 0; i < c; i++) factor_row(&d->b, j0 + i, tmp + i * r);
        fx_gemm_linear(kc, c, tmp, r, at, dw, k, NULL);
        break;
    }
    case FX_DELTA_DENSE:
        for (int64_t i = 0; i < c; i++) factor_row(&d->a, j0 + i, dw + i * k);
        break;
    case FX_DELTA_KRON: {
        const int64_t k2 = d->c.data ? d->c.n : d->a.n, n2 = d->a.k, m1 = d->b.k;
        for (int64_t i = 0; i < c; i++) {
            const int64_t o = d->kron_skip + j0 + i, i1 = o / k2, i2 = o % k2;
            factor_row(&d->b, i1, tmp);
            for (int64_t j1 = 0; j1 < m1; j1++)
                for (int64_t j2 = 0; j2 < n2; j2++) dw[i * k + j1 * n2 + j2] = tmp[j1] * w2[i2 * n2 + j2];
        }
        break;
    }
    }
}

int fx_delta_row_norms(const fx_kctx *kc, const fx_weight *w, const fx_delta *d, double s, double *norms) {
    const int64_t k = w->k, rows = d->rows;
    const int kron = d->kind == FX_DELTA_KRON, lowrank = d->kind == FX_DELTA_LOWRANK;
    const int64_t k2 = kron ? (d->c.data ? d->c.n : d->a.n) : 0, n2 = kron ? d->a.k : 0;
    const int64_t r = lowrank ? d->a.n : 0, tmp_n = lowrank ? CHUNK * r : kron ? d->b.k : 1;
    float *dw = malloc((size_t)(CHUNK * k) * sizeof *dw), *tmp = malloc((size_t)tmp_n * sizeof *tmp);
    float *at = lowrank ? malloc((size_t)(k * r) * sizeof *at) : NULL;
    float *w2 = kron ? malloc((size_t)(k2 * n2) * sizeof *w2) : NULL;
    float *row = malloc((size_t)(k > n2 ? k : n2) * sizeof *row);
    int ok = dw && tmp && row && (!lowrank || at) && (!kron || w2);
    if (ok && lowrank) /* Aᵀ [k, r] */
        for (int64_t p = 0; p < r; p++) {
            factor_row(&d->a, p, row);
            for (int64_t j = 0; j < k; j++) at[j * r + p] = row[j];
        }
    if (ok && kron) { /* W2 [k2, n2], or c·a */
        if (!d->c.data) {
            for (int64_t i = 0; i < k2; i++) factor_row(&d->a, i, w2 + i * n2);
        } else {
            const int64_t r2 = d->a.n;
            float *a = malloc((size_t)(r2 * n2) * sizeof *a), *crow = malloc((size_t)r2 * sizeof *crow);
            ok = a && crow;
            if (ok) {
                for (int64_t p = 0; p < r2; p++) factor_row(&d->a, p, a + p * n2);
                for (int64_t i = 0; i < k2; i++) {
                    factor_row(&d->c, i, crow);
                    for (int64_t j = 0; j < n2; j++) {
                        float acc = 0.0f;
                        for (int64_t p = 0; p < r2; p++) acc += crow[p] * a[p * n2 + j];
                        w2[i * n2 + j] = acc;
                    }
                }
            }
            free(a), free(crow);
        }
    }
    free(row);
    if (!ok) {
        free(dw), free(tmp), free(at), free(w2);
        return -1;
    }
    const fx_weight atw = {.data = at, .dtype = FX_DTYPE_F32, .n = k, .k = r, .ld = r};
    const int threads = kc->threads > 0 ? kc->threads : 1;
    int failed = 0;
    (void)threads; /* only read by the OpenMP pragma */
    for (int64_t j0 = 0; j0 < rows; j0 += CHUNK) {
        const int64_t c = rows - j0 < CHUNK ? rows - j0 : CHUNK;
        delta_rows(kc, d, k, j0, c, &atw, w2, tmp, dw);
#pragma omp parallel for num_threads(threads) if (threads > 1 && c > 1) schedule(static) reduction(| : failed)
        for (int64_t i = 0; i < c; i++) {
            float *wr = malloc((size_t)k * sizeof *wr);
            if (!wr) {
                failed = 1;
                continue;
            }
            const int64_t wrow = d->row0 + j0 + i;
            fx_dequantize_row(w->dtype, (const char *)w->data + fx_dtype_row_bytes(w->dtype, wrow * w->ld), k, wr);
            fx_weight_values(w, wrow, 0, k, wr); /* the weight's values */
            double sum = 0.0;
            for (int64_t j = 0; j < k; j++) {
                const double v = (double)wr[j] + s * (double)dw[i * k + j];
                sum += v * v;
            }
            norms[j0 + i] = sqrt(sum);
            free(wr);
        }
    }
    free(dw), free(tmp), free(at), free(w2);
    return failed ? -1 : 0;
}
