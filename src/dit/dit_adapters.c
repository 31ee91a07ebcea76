/*
 * dit_adapters.c — adapter terms on the transformer's linear views
 * (fx_dit_set_adapters, transformer.h).
 *
 * Every linear view the transformer reads is listed with its tensor and
 * first row (fx_dit_linear). A module piece of an adapter adds to rows
 * [tensor_row0, tensor_row0 + rows) of its tensor; on a view of rows
 * [row0, row0 + n) of the same tensor, the overlap becomes one term
 * (fx_delta_rows: the matching ΔW rows at the view's output column). The
 * terms of a view are chained in adapter order, then module order, so the
 * sum is evaluated the same way on every run.
 *
 * DoRA modules (fx_lora_module.magnitude) also rescale their rows: with
 * strength λ and the file's scale s, row j of the layer becomes
 *   W + λ·(g·(W + s·ΔW) − W) = (1 + λ(g − 1))·W + λ·s·g·ΔW,  g = m / ‖W + s·ΔW‖
 * so the term gets w_gate = 1 + λ(g − 1) and row_scale = g (kernels.h),
 * with the norms made here from the view's own rows (fx_delta_row_norms:
 * mapped or quantized, read in place) on every attach, i.e. once per load
 * or change of strength. A DoRA row carries no other term (refused).
 */
#include "dit_internal.h"
#include "src/adapters/lora.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Gates of a DoRA term d (rows of module m from src0) into gates [2·rows]:
 * w_gate then row_scale. */
static flux_status dora_gates(const fx_dit *t, const fx_dit_linear *lin, const fx_lora_module *m, int64_t src0,
                              double strength, fx_delta *d, float *gates, fx_err *err) {
    double *norms = malloc((size_t)d->rows * sizeof *norms);
    if (!norms || fx_delta_row_norms(fx_ops_kctx(t->ops), lin->w, d, (double)m->delta.scale, norms)) {
        free(norms);
        return fx_fail(err, FLUX_ERR_NOMEM, "out of memory (DoRA norms of '%.200s')", m->key);
    }
    float *wg = gates, *rs = gates + d->rows;
    for (int64_t j = 0; j < d->rows; j++) {
        /* a zero row stays zero (g·0); g = 0 keeps that without dividing by 0 */
        const double g = norms[j] > 0.0 ? (double)m->magnitude[src0 + j] / norms[j] : 0.0;
        wg[j] = (float)(1.0 + strength * (g - 1.0));
        rs[j] = (float)g;
        if (!isfinite(wg[j]) || !isfinite(rs[j])) {
            free(norms);
            return fx_fail(err, FLUX_ERR_INVALID_ARG, "module '%.200s' on '%.200s': DoRA gate of row %lld is not finite",
                           m->key, lin->tensor, (long long)(src0 + j));
        }
    }
    free(norms);
    d->w_gate = wg, d->row_scale = rs;
    return FLUX_OK;
}

/* The terms of view v, written to out (NULL: only counted, with the floats
 * their DoRA gates need added to *gate_floats); gates: where the gates go
 * (advanced). Returns their number, or -1 with an error. */
static long view_terms(const fx_dit *t, int v, const fx_lora *const *loras, const float *strengths, int n,
                       fx_delta *out, float **gates, size_t *gate_floats, fx_err *err) {
    const fx_dit_linear *lin = &t->linears[v];
    const int64_t v0 = lin->row0, v1 = v0 + lin->w->n;
    long count = 0;
    for (int a = 0; a < n; a++)
        for (size_t i = 0; i < fx_lora_count(loras[a]); i++) {
            const fx_lora_module *m = fx_lora_module_at(loras[a], i);
            const double s = (double)strengths[a] * (double)m->delta.scale;
            if (s == 0.0) continue;
            for (int p = 0; p < m->n_pieces; p++) {
                const fx_lora_piece *pc = &m->piece[p];
                const int64_t lo = pc->tensor_row0 > v0 ? pc->tensor_row0 : v0;
                const int64_t hi = pc->tensor_row0 + pc->rows < v1 ? pc->tensor_row0 + pc->rows : v1;
                if (lo >= hi || strcmp(pc->tensor, lin->tensor)) continue;
                if (!out && m->magnitude) *gate_floats += 2 * (size_t)(hi - lo);
                if (out) {
                    fx_delta *d = &out[count];
                    *d = fx_delta_rows(&m->delta, pc->src_row0 + (lo - pc->tensor_row0), hi - lo, lo - v0);
                    d->scale = (float)s;
                    char why[200];
                    if (!isfinite(d->scale)) snprintf(why, sizeof why, "scale %g is not finite", s);
                    if (!isfinite(d->scale) || fx_delta_check(d, lin->w->n, lin->w->k, why, sizeof why))
                        return fx_fail(err, FLUX_ERR_INVALID_ARG, "adapter %d, module '%.200s' on '%.200s': %s", a + 1,
                                       m->key, lin->tensor, why),
                               -1;
                    if (m->magnitude) {
                        if (dora_gates(t, lin, m, pc->src_row0 + (lo - pc->tensor_row0), strengths[a], d, *gates, err))
                            return -1;
                        *gates += 2 * d->rows;
                    }
                    if (count) out[count - 1].next = d;
                }
                count++;
            }
        }
    return count;
}

flux_status fx_dit_set_adapters(fx_dit *t, const fx_lora *const *loras, const float *strengths, int n, fx_err *err) {
    size_t *first = calloc((size_t)t->n_linears + 1, sizeof *first);
    if (!first) return fx_fail(err, FLUX_ERR_NOMEM, "out of memory (adapter terms)");
    size_t gate_floats = 0;
    for (int v = 0; v < t->n_linears; v++)
        first[v + 1] = first[v] + (size_t)view_terms(t, v, loras, strengths, n, NULL, NULL, &gate_floats, err);
    const size_t count = first[t->n_linears];
    fx_delta *terms = count ? calloc(count, sizeof *terms) : NULL;
    float *gates = gate_floats ? malloc(gate_floats * sizeof *gates) : NULL, *cursor = gates;
    if ((count && !terms) || (gate_floats && !gates)) {
        free(first);
        free(terms);
        free(gates);
        return fx_fail(err, FLUX_ERR_NOMEM, "out of memory (%zu adapter terms)", count);
    }
    for (int v = 0; v < t->n_linears; v++) {
        if (first[v + 1] == first[v]) continue;
        int x, y;
        if (view_terms(t, v, loras, strengths, n, terms + first[v], &cursor, NULL, err) < 0 ||
            (fx_delta_chain_check(&terms[first[v]], &x, &y) &&
             fx_fail(err, FLUX_ERR_UNSUPPORTED,
                     "'%.200s': a DoRA module and another adapter module change the same rows (terms %d and %d of "
                     "the layer); DoRA rescales whole rows and does not stack with other adapters there",
                     t->linears[v].tensor, x + 1, y + 1))) {
            free(first);
            free(terms);
            free(gates);
            return err->code;
        }
    }
    for (int v = 0; v < t->n_linears; v++) /* the backend lets go of the old terms here */
        fx_ops_weight_set_terms(t->ops, t->linears[v].op, first[v + 1] > first[v] ? &terms[first[v]] : NULL);
    free(first);
    free(t->deltas);
    free(t->dora_gates);
    t->deltas = terms;
    t->n_deltas = count;
    t->dora_gates = gates;
    return FLUX_OK;
}

size_t fx_dit_adapter_terms(const fx_dit *t) { return t->n_deltas; }
