/*
 * linear.c — the entry point of a linear layer (kernels.h):
 *   Y [m, n] = epilogue(X [m, k] · Wᵀ)  then  + each additive term of W
 * The product is fx_gemm_linear (gemm.c: packing, microkernels, threads),
 * or when kc->int8 asks for W8A8 the int8 GEMM (gemm_int8.c) on the
 * weight's int8 form made at load, or on its blocks converted per call;
 * the terms (LoRA / LyCORIS, fx_delta) follow with the same epilogue
 * (delta.c).
 *
 * Terms with a w_gate (DoRA) rescale the product's columns they cover: on
 * accumulate layers the gates join the epilogue's gate (one vector [n],
 * 1 elsewhere); on store layers the product is stored and those columns
 * multiplied after. Either way the bias is added once, ungated by DoRA.
 */
#include "gemm_int8.h"

#include <math.h>

static const fx_epilogue store = {FX_EPI_STORE, NULL, NULL};

/* The main product alone: W8A8 when the mode asks for it (fx_linear_int8
 * declines a weight with neither an int8 form nor blocks, and runs nothing
 * without scratch memory or for K too long for exact int32 sums), else
 * fx_gemm_linear. */
static void product(const fx_kctx *kc, int64_t m, const float *x, int64_t ldx, const fx_weight *w,
                    const struct fx_int8w *f, float *y, int64_t ldy, const fx_epilogue *epi) {
    if (!kc->int8 || fx_linear_int8(kc, NULL, m, x, ldx, w, f, y, ldy, epi)) fx_gemm_linear(kc, m, x, ldx, w, y, ldy, epi);
}

static int has_w_gate(const fx_weight *w) {
    for (const fx_delta *d = w->delta; d; d = d->next)
        if (d->w_gate) return 1;
    return 0;
}

/* The main product with the w_gates of w's terms on their columns. */
static void gated_product(const fx_kctx *kc, int64_t m, const float *x, int64_t ldx, const fx_weight *w,
                          const struct fx_int8w *f, float *y, int64_t ldy, const fx_epilogue *epi) {
    const int64_t n = w->n;
    const int gated = epi->mode == FX_EPI_GATED_ACCUMULATE;
    if (epi->mode == FX_EPI_STORE) {
        product(kc, m, x, ldx, w, f, y, ldy, &store);
        const int threads = kc->threads > 0 ? kc->threads : 1;
        (void)threads; /* only read by the OpenMP pragma */
#pragma omp parallel for num_threads(threads) if (threads > 1 && m > 1) schedule(static)
        for (int64_t i = 0; i < m; i++) {
            float *yr = y + i * ldy;
            for (const fx_delta *d = w->delta; d; d = d->next)
                if (d->w_gate && !fx_delta_check(d, n, w->k, NULL, 0))
                    for (int64_t j = 0; j < d->rows; j++) yr[d->row0 + j] *= d->w_gate[j];
            if (epi->bias)
                for (int64_t j = 0; j < n; j++) yr[j] += epi->bias[j];
        }
        return;
    }
    float *g = fx_scratch_slot_get(kc->scratch, FX_SLOT_DELTA, (size_t)n * sizeof *g);
    if (!g) { /* without scratch memory the result shows it */
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) y[i * ldy + j] = NAN;
        return;
    }
    for (int64_t j = 0; j < n; j++) g[j] = gated ? epi->gate[j] : 1.0f;
    for (const fx_delta *d = w->delta; d; d = d->next)
        if (d->w_gate && !fx_delta_check(d, n, w->k, NULL, 0))
            for (int64_t j = 0; j < d->rows; j++) g[d->row0 + j] *= d->w_gate[j];
    const fx_epilogue ge = {FX_EPI_GATED_ACCUMULATE, NULL, g};
    product(kc, m, x, ldx, w, f, y, ldy, &ge);
    if (epi->bias)
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) y[i * ldy + j] += gated ? epi->gate[j] * epi->bias[j] : epi->bias[j];
}

void fx_linear(const fx_kctx *kc, int64_t m, const float *x, int64_t ldx, const fx_weight *w, float *y, int64_t ldy,
               const fx_epilogue *epi) {
    if (!epi) epi = &store;
    if (w->delta && has_w_gate(w)) gated_product(kc, m, x, ldx, w, NULL, y, ldy, epi);
    else product(kc, m, x, ldx, w, NULL, y, ldy, epi);
    fx_delta_apply(kc, m, x, ldx, w, y, ldy, epi);
}

void fx_linear_int8w(const fx_kctx *kc, int64_t m, const float *x, int64_t ldx, const fx_weight *w,
                     const struct fx_int8w *f, float *y, int64_t ldy, const fx_epilogue *epi) {
    if (!epi) epi = &store;
    if (w->delta && has_w_gate(w)) gated_product(kc, m, x, ldx, w, f, y, ldy, epi);
    else product(kc, m, x, ldx, w, f, y, ldy, epi);
    fx_delta_apply(kc, m, x, ldx, w, y, ldy, epi);
}
