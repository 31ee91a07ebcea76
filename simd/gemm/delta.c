/*
 * delta.c — the additive terms of a linear layer (fx_delta, kernels.h):
 * LoRA / LyCORIS adapters applied at run time after the main product
 * (fx_linear, linear.c calls fx_delta_apply), never merged into the weight
 * (which may be mmap'd, shared or quantized).
 *
 * Every form ends in one gated accumulate into the term's output columns,
 * with the gate g [rows] = s (store and accumulate layers: the main
 * product is already in Y) or s·gate (gated layers), times a DoRA term's
 * row_scale, so the layer's epilogue holds for the sum:
 *   LOWRANK  T = X·Aᵀ [m, r] (store), then Y[:, row0..] += g ⊙ (T·Bᵀ)
 *   DENSE    Y[:, row0..] += g ⊙ (X·ΔWᵀ)
 *   KRON     per token Z = X_t·W2ᵀ [m1, k2] (X_t = x viewed as [m1, n2];
 *            with W2 = c·a, (X_t·aᵀ)·cᵀ),
 *            Zᵀ, Y' = Zᵀ·W1ᵀ [k2, l] = (W1·Z)ᵀ, then y += g ⊙ (its rows
 *            of the flattened W1·Z)
 * Products go through fx_gemm_linear on the factors (packing, microkernels,
 * threads), so they are bit-identical for any thread count; the transposes
 * and the KRON write-back are elementwise. Temporaries live in the
 * FX_SLOT_DELTA scratch, rows processed in chunks of at most CHUNK_BYTES.
 */
#include "gemm.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

enum { CHUNK_BYTES = 32 << 20 };

static int64_t round16(int64_t v) { return (v + 15) / 16 * 16; }

fx_delta fx_delta_rows(const fx_delta *d, int64_t src0, int64_t rows, int64_t dst0) {
    fx_delta s = *d;
    s.row0 = dst0;
    s.rows = rows;
    s.next = NULL;
    if (d->w_gate) s.w_gate = d->w_gate + src0;
    if (d->row_scale) s.row_scale = d->row_scale + src0;
    switch (d->kind) {
    case FX_DELTA_LOWRANK: s.b = fx_weight_rows(&d->b, src0, rows); break;
    case FX_DELTA_DENSE: s.a = fx_weight_rows(&d->a, src0, rows); break;
    case FX_DELTA_KRON: {
        const int64_t k2 = d->c.data ? d->c.n : d->a.n, first = d->kron_skip + src0;
        const int64_t i0 = first / k2, i1 = (first + rows + k2 - 1) / k2;
        s.b = fx_weight_rows(&d->b, i0, i1 - i0);
        s.kron_skip = first - i0 * k2;
        break;
    }
    }
    return s;
}

int fx_delta_check(const fx_delta *d, int64_t n, int64_t k, char *why, size_t why_size) {
    const char *bad = NULL;
    char buf[160];
    if (!isfinite(d->scale) || d->scale == 0.0f) bad = "the scale is zero or not finite";
    else if (d->row0 < 0 || d->rows < 1 || d->row0 + d->rows > n) bad = "its rows fall outside the layer";
    else if (d->a.delta || d->b.delta || !d->a.data || d->a.ld < d->a.k) bad = "a factor is not a plain weight";
    else if (d->kind == FX_DELTA_LOWRANK) {
        if (!d->b.data || d->b.ld < d->b.k) bad = "a factor is not a plain weight";
        else if (d->a.k != k || d->b.n != d->rows || d->b.k != d->a.n || d->a.n < 1) {
            snprintf(buf, sizeof buf, "A [%lld, %lld] and B [%lld, %lld] do not fit %lld rows x %lld inputs",
                     (long long)d->a.n, (long long)d->a.k, (long long)d->b.n, (long long)d->b.k, (long long)d->rows,
                     (long long)k);
            bad = buf;
        }
    } else if (d->kind == FX_DELTA_DENSE) {
        if (d->a.k != k || d->a.n != d->rows) bad = "the dense delta's shape does not fit the layer";
    } else if (d->kind == FX_DELTA_KRON) {
        const int64_t k2 = d->c.data ? d->c.n : d->a.n;
        if (!d->b.data || d->b.ld < d->b.k || d->a.n < 1 || d->b.n < 1 || k2 < 1 ||
            (d->c.data && (d->c.delta || d->c.ld < d->c.k)))
            bad = "a factor is not a plain weight";
        else if (d->c.data && d->c.k != d->a.n) bad = "the two factors of W2 differ in rank";
        else if (d->b.k * d->a.k != k) bad = "W1 columns x W2 columns differ from the layer's inputs";
        else if (d->kron_skip < 0 || d->kron_skip + d->rows > d->b.n * k2)
            bad = "its rows fall outside W1 x W2";
    } else {
        bad = "unknown kind";
    }
    if (bad && why_size) snprintf(why, why_size, "%s", bad);
    return bad ? -1 : 0;
}

int fx_delta_chain_check(const fx_delta *d, int *a, int *b) {
    int i = 0;
    for (const fx_delta *x = d; x; x = x->next, i++) {
        if (!x->w_gate) continue;
        int j = 0;
        for (const fx_delta *y = d; y; y = y->next, j++)
            if (y != x && y->row0 < x->row0 + x->rows && x->row0 < y->row0 + y->rows) {
                *a = i < j ? i : j, *b = i < j ? j : i;
                return -1;
            }
    }
    return 0;
}

/* The term's gate g [rows] = s (store / accumulate layers) or s·gate[row0 + j]
 * (gated), followed by room for per_row floats of each of *chunk rows of X
 * (chunk <= m, chunk·per_row floats <= CHUNK_BYTES). Without scratch memory:
 * NULL, and the term's columns of y become NaN (the failure shows). */
static float *term_scratch(const fx_kctx *kc, int64_t m, const fx_delta *d, const fx_epilogue *epi, int64_t per_row,
                           int64_t *chunk, float *y, int64_t ldy) {
    const int64_t gfl = round16(d->rows);
    *chunk = per_row ? CHUNK_BYTES / 4 / per_row : m;
    if (*chunk > m) *chunk = m;
    if (*chunk < 1) *chunk = 1;
    float *g = fx_scratch_slot_get(kc->scratch, FX_SLOT_DELTA, (size_t)(gfl + *chunk * per_row) * sizeof(float));
    if (!g) {
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < d->rows; j++) y[i * ldy + d->row0 + j] = NAN;
        return NULL;
    }
    for (int64_t j = 0; j < d->rows; j++)
        g[j] = epi->mode == FX_EPI_GATED_ACCUMULATE ? d->scale * epi->gate[d->row0 + j] : d->scale;
    if (d->row_scale)
        for (int64_t j = 0; j < d->rows; j++) g[j] *= d->row_scale[j];
    return g;
}

static void apply_lowrank(const fx_kctx *kc, int64_t m, const float *x, int64_t ldx, const fx_delta *d, float *y,
                          int64_t ldy, const fx_epilogue *epi) {
    const int64_t r = d->a.n;
    int64_t chunk;
    float *g = term_scratch(kc, m, d, epi, r, &chunk, y, ldy);
    if (!g) return;
    float *t = g + round16(d->rows);
    const fx_epilogue acc = {FX_EPI_GATED_ACCUMULATE, NULL, g};
    for (int64_t i = 0; i < m; i += chunk) {
        const int64_t rows = m - i < chunk ? m - i : chunk;
        fx_gemm_linear(kc, rows, x + i * ldx, ldx, &d->a, t, r, NULL);
        fx_gemm_linear(kc, rows, t, r, &d->b, y + i * ldy + d->row0, ldy, &acc);
    }
}

static void apply_dense(const fx_kctx *kc, int64_t m, const float *x, int64_t ldx, const fx_delta *d, float *y,
                        int64_t ldy, const fx_epilogue *epi) {
    int64_t chunk;
    float *g = term_scratch(kc, m, d, epi, 0, &chunk, y, ldy);
    if (!g) return;
    const fx_epilogue acc = {FX_EPI_GATED_ACCUMULATE, NULL, g};
    fx_gemm_linear(kc, m, x, ldx, &d->a, y + d->row0, ldy, &acc);
}

static void apply_kron(const fx_kctx *kc, int64_t m, const float *x, int64_t ldx, const fx_delta *d, float *y,
                       int64_t ldy, const fx_epilogue *epi) {
    const fx_weight *w2 = &d->a, *w1 = &d->b;
    const int factored = d->c.data != NULL; /* W2 = c·a */
    const int64_t k2 = factored ? d->c.n : w2->n, r2 = factored ? w2->n : 0, n2 = w2->k, l = w1->n, m1 = w1->k,
                  k = m1 * n2;
    const int copy = ldx != k; /* the token views need rows of exactly k */
    int64_t chunk;
    float *g = term_scratch(kc, m, d, epi, (copy ? k : 0) + m1 * r2 + 2 * m1 * k2 + k2 * l, &chunk, y, ldy);
    if (!g) return;
    float *xc = g + round16(d->rows), *z1 = xc + (copy ? chunk * k : 0), *z = z1 + chunk * m1 * r2,
          *zt = z + chunk * m1 * k2, *yp = zt + chunk * m1 * k2;
    const int threads = kc->threads > 0 ? kc->threads : 1;
    (void)threads; /* only read by the OpenMP pragmas */
    for (int64_t i0 = 0; i0 < m; i0 += chunk) {
        const int64_t c = m - i0 < chunk ? m - i0 : chunk;
        const float *xs = x + i0 * ldx;
        if (copy) {
            for (int64_t t = 0; t < c; t++) memcpy(xc + t * k, xs + t * ldx, (size_t)k * sizeof(float));
            xs = xc;
        }
        if (factored) { /* Z = (X·aᵀ)·cᵀ [c·m1, k2] */
            fx_gemm_linear(kc, c * m1, xs, n2, w2, z1, r2, NULL);
            fx_gemm_linear(kc, c * m1, z1, r2, &d->c, z, k2, NULL);
        } else {
            fx_gemm_linear(kc, c * m1, xs, n2, w2, z, k2, NULL); /* Z [c·m1, k2] */
        }
#pragma omp parallel for num_threads(threads) if (threads > 1 && c > 1) schedule(static)
        for (int64_t t = 0; t < c; t++) /* Zᵀ per token: [k2, m1] */
            for (int64_t j1 = 0; j1 < m1; j1++)
                for (int64_t i2 = 0; i2 < k2; i2++) zt[(t * k2 + i2) * m1 + j1] = z[(t * m1 + j1) * k2 + i2];
        fx_gemm_linear(kc, c * k2, zt, m1, w1, yp, l, NULL); /* Y' [c·k2, l]: (W1·Z)ᵀ per token */
#pragma omp parallel for num_threads(threads) if (threads > 1 && c > 1) schedule(static)
        for (int64_t t = 0; t < c; t++) {
            float *yr = y + (i0 + t) * ldy + d->row0;
            const float *src = yp + t * k2 * l;
            for (int64_t j = 0; j < d->rows; j++) {
                const int64_t o = d->kron_skip + j, i1 = o / k2, i2 = o % k2;
                yr[j] += g[j] * src[i2 * l + i1];
            }
        }
    }
}

void fx_delta_apply(const fx_kctx *kc, int64_t m, const float *x, int64_t ldx, const fx_weight *w, float *y,
                    int64_t ldy, const fx_epilogue *epi) {
    if (m <= 0 || w->n <= 0 || w->k <= 0 || !w->delta) return;
    for (const fx_delta *d = w->delta; d; d = d->next) {
        if (fx_delta_check(d, w->n, w->k, NULL, 0)) continue; /* refused when attached (fx_delta_check) */
        switch (d->kind) {
        case FX_DELTA_LOWRANK: apply_lowrank(kc, m, x, ldx, d, y, ldy, epi); break;
        case FX_DELTA_DENSE: apply_dense(kc, m, x, ldx, d, y, ldy, epi); break;
        case FX_DELTA_KRON: apply_kron(kc, m, x, ldx, d, y, ldy, epi); break;
        }
    }
}
